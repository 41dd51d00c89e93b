"""Failures to load become messages a person can act on; nothing downloaded is ever run."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer.models.architectures import infer_kind
from tests.tiny_models import TINY


def test_unknown_hub_id_offline_says_hub_unreachable():
    with pytest.raises(explorer.ModelLoadError, match="Could not reach the Hugging Face Hub"):
        explorer.load_model("no-such-org/no-such-model-xyz")


def test_missing_local_folder(tmp_path):
    with pytest.raises(explorer.ModelLoadError) as error:
        explorer.load_model(str(tmp_path / "nothing-here"))
    assert "config.json" in str(error.value) or "Hub" in str(error.value)


def test_empty_name():
    with pytest.raises(explorer.ModelLoadError, match="No model name"):
        explorer.load_model("  ")


def test_model_without_tokenizer(tmp_path):
    from transformers import ViTConfig

    config = ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    config.save_pretrained(tmp_path)
    with pytest.raises(explorer.ModelLoadError, match="no text tokenizer"):
        explorer.load_model(str(tmp_path))


def test_remote_code_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "my-secret-arch", "auto_map": {"AutoConfig": "configuration_x.XConfig"}})
    )
    with pytest.raises(explorer.ModelLoadError) as error:
        explorer.load_model(str(tmp_path))
    assert "never runs downloaded code" in str(error.value) or "architecture" in str(error.value)


@pytest.mark.parametrize(
    "name, kind", [("bert", "encoder"), ("gpt2", "decoder"), ("llama", "decoder"), ("t5", "encoder-decoder")]
)
def test_kind_from_config(name, kind):
    assert infer_kind(TINY[name][1]()) == kind


def test_hub_unreachable_without_offline_mode(monkeypatch):
    """A classroom with no Wi-Fi: the hub is tried, the connection fails, the message says so."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("transformers.utils.hub.is_offline_mode", lambda: False, raising=False)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    with pytest.raises(explorer.ModelLoadError, match="Could not reach the Hugging Face Hub"):
        explorer.load_model("openai-community/gpt2-but-not-cached")
