"""IR helpers shared by the passes and the rest of the compiler side.

``jaxpp_mlir.ir.utils``: finding ``@main`` (one way: ``find_main``/``get_main``),
the loop and the stage block; walking ops and querying uses.
"""
