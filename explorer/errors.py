"""Errors the app turns into messages: each says what went wrong and what to do."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what failed and what to do."""


class InputError(ValueError):
    """The user's input cannot be shown (empty text, nothing left after tokenizing, ...)."""


class NotApplicable(InputError):
    """The feature does not apply to this architecture (a model with no attention has no heads to ablate, one
    that keeps no cache has no cache to show); the message says why. Pages show it as they show any InputError."""
