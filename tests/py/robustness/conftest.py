"""The robustness suite: markers it uses."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a multi-process test taking tens of seconds")
