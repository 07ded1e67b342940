"""The one error a model load raises."""


class ModelLoadError(RuntimeError):
    """The model file could not be found, read or understood; the message says what is wrong and what to do."""
