"""The error of the built-in example generators (births and persons share it)."""


class ExampleError(ValueError):
    """Unusable arguments for the example generator."""
