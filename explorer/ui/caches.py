"""The server's shared caches of models and model results, for every session: they live in ``explorer.gateway``
(no Streamlit there, so the gateway owns them); named here for the code and tests that look for them in ui."""

from explorer.gateway import models_cache, results_cache

__all__ = ["models_cache", "results_cache"]
