"""Flax's Gemma example (``examples/gemma`` of https://github.com/google/flax at commit
18f8f311c275d57f46d95e41b15aa97b454754c0, Apache License 2.0: ``LICENSE`` here), a
flax nnx transformer written for JAX's explicit sharding: every parameter carries an
``out_sharding`` and every einsum names its result's sharding (``ShardingConfig``).

Third-party code, not this project's: each module is flax's file unchanged except a
header naming its origin and its imports of sibling modules, made relative to this
package. ``examples/third_party_models.py`` (``gemma_flax``) pipelines it with stage
markers added from outside. Needs ``jaxtyping`` (its type annotations) and orbax (flax's
own dependency, for ``params``).
"""
