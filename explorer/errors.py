"""Errors the app turns into messages: each says what went wrong and what to do."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what failed and what to do."""


class InputError(ValueError):
    """The user's input cannot be shown (empty text, nothing left after tokenizing, ...)."""
