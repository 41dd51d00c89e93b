"""Failures to load become messages a person can act on; nothing downloaded is ever run."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer.models.architectures import infer_kind
from tests.devices import DEVICE
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


def _config(model_type: str, **settings):
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type](**settings)


@pytest.mark.parametrize(
    ("model_type", "settings", "kind"),
    [
        # Masked-LM families that also have a causal-LM class: encoders unless is_decoder (issue 40: these five
        # loaded as decoders, so greedy decoding differed from generate() and beam search crashed).
        ("camembert", {"architectures": ["CamembertForMaskedLM"]}, "encoder"),
        ("data2vec-text", {"architectures": ["Data2VecTextForMaskedLM"]}, "encoder"),
        ("roberta-prelayernorm", {"architectures": ["RobertaPreLayerNormForMaskedLM"]}, "encoder"),
        ("xlm-roberta-xl", {"architectures": ["XLMRobertaXLForMaskedLM"]}, "encoder"),
        ("ernie", {"architectures": ["ErnieForMaskedLM"]}, "encoder"),
        ("roberta", {}, "encoder"),
        ("roberta", {"is_decoder": True, "architectures": ["RobertaForCausalLM"]}, "decoder"),
        ("roberta", {"is_decoder": True}, "decoder"),
        ("roberta", {"is_decoder": True, "architectures": ["RobertaForMaskedLM"]}, "encoder"),
        # No masked-LM class: a decoder, unless the checkpoint was saved as the base model alone (no head).
        ("gpt2", {"architectures": ["GPT2LMHeadModel"]}, "decoder"),
        ("llama", {}, "decoder"),
        ("llama", {"architectures": ["LlamaModel"]}, "encoder"),
        ("bert-generation", {"architectures": ["BertGenerationEncoder"]}, "encoder"),
        ("bert-generation", {"architectures": ["BertGenerationDecoder"], "is_decoder": True}, "decoder"),
        ("mamba", {}, "decoder"),
        ("m2m_100", {}, "encoder-decoder"),
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()) or "plain",
)
def test_kind_from_the_config_and_the_class_it_was_saved_as(model_type, settings, kind):
    assert infer_kind(_config(model_type, **settings)) == kind


def test_no_quirk_sets_the_kind():
    """The config says it: the table keeps only what a config cannot say (issue 40)."""
    from explorer.models.architectures import QUIRKS

    assert [name for name, quirks in QUIRKS.items() if quirks.kind is not None] == []


def test_hub_unreachable_without_offline_mode(monkeypatch):
    """A classroom with no Wi-Fi: the hub is tried, the connection fails, the message says so."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("transformers.utils.hub.is_offline_mode", lambda: False, raising=False)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    with pytest.raises(explorer.ModelLoadError, match="Could not reach the Hugging Face Hub"):
        explorer.load_model("openai-community/gpt2-but-not-cached")


def test_a_model_that_returns_no_attention_loads_and_its_capture_says_so(tmp_path):
    """Loading never depends on capture (issue 40): a model whose attention neither runs through the interface nor
    comes back as output_attentions loads; a capture says, in a sentence, that there are no weights to show."""
    import torch
    from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import BaseModelOutput

    from tests.tiny_models import VOCAB, word_tokenizer

    class HandRolledConfig(PretrainedConfig):
        model_type = "explorer-hand-rolled-test"

        def __init__(self, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, **kwargs):
            super().__init__(**kwargs)
            self.hidden_size, self.num_hidden_layers = hidden_size, num_hidden_layers
            self.num_attention_heads, self.vocab_size = num_attention_heads, len(VOCAB)

    class HandRolledModel(PreTrainedModel):
        config_class = HandRolledConfig

        def __init__(self, config):
            super().__init__(config)
            self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
            self.attn = torch.nn.MultiheadAttention(config.hidden_size, config.num_attention_heads, batch_first=True)
            self.post_init()

        def forward(self, input_ids, attention_mask=None, token_type_ids=None, **kwargs):
            hidden = self.embed(input_ids)
            return BaseModelOutput(last_hidden_state=self.attn(hidden, hidden, hidden)[0])

    AutoConfig.register(HandRolledConfig.model_type, HandRolledConfig, exist_ok=True)
    AutoModel.register(HandRolledConfig, HandRolledModel, exist_ok=True)
    HandRolledModel(HandRolledConfig()).save_pretrained(tmp_path)
    word_tokenizer().save_pretrained(tmp_path)
    lm = explorer.load_model(str(tmp_path), device=DEVICE)
    assert lm.attention == "returned" and lm.weights_only  # its output has a place for attentions, left empty
    with pytest.raises(explorer.InputError, match="returned no attention weights for this text"):
        explorer.capture(lm, "the cat")


# Two families without attention heads: RWKV (recurrent) returns each layer's output as its `attentions`, FNet
# (tokens mixed by Fourier transforms) returns none. Saved as their Hub checkpoints are (RWKV's init needs 2 layers).
NO_HEADS = {
    "rwkv": (
        "AutoModelForCausalLM",
        dict(hidden_size=16, attention_hidden_size=16, intermediate_size=32, num_hidden_layers=2),
    ),
    "fnet": (
        "AutoModelForMaskedLM",
        dict(hidden_size=16, intermediate_size=32, max_position_embeddings=64, num_hidden_layers=1),
    ),
}


@pytest.mark.parametrize("model_type", sorted(NO_HEADS))
def test_a_model_whose_config_names_no_heads_loads_without_attention(tmp_path, model_type):
    """Neither config names attention heads, so neither model has any, whatever its output holds: each loads as
    Mamba does (attention "none", no heads); a capture and head ablation say they do not apply, and RWKV decodes
    as generate() does."""
    import torch
    import transformers
    from transformers import CONFIG_MAPPING

    from tests.test_decoding import assert_same_as_generate, fill_tokens, reference_config
    from tests.tiny_models import IDS, word_tokenizer

    auto_class, settings = NO_HEADS[model_type]
    torch.manual_seed(0)
    config = CONFIG_MAPPING[model_type](**IDS, **settings)
    getattr(transformers, auto_class).from_config(config).save_pretrained(tmp_path)
    word_tokenizer().save_pretrained(tmp_path)
    lm = explorer.load_model(tmp_path, device=DEVICE)
    assert (lm.attention, lm.num_heads) == ("none", 0)
    with pytest.raises(explorer.NotApplicable, match=r"has no attention layers.*attention views do not apply"):
        explorer.capture(lm, "the cat sat")
    if lm.kind == "decoder":
        case = dict(strategy="greedy", max_new_tokens=3)
        ids = lm.tokenizer("the cat sat", return_tensors="pt")["input_ids"].to(lm.device)
        with torch.inference_mode():
            expected = lm.model.generate(ids, generation_config=reference_config(lm, case))
        assert_same_as_generate(explorer.decode(lm, "the cat sat", **case), expected, fill_tokens(lm))
        with pytest.raises(explorer.NotApplicable, match=r"Head ablation does not apply .* no attention heads"):
            explorer.head_ablation_effects(lm, "the cat sat")  # what RWKV returns as attentions are no heads


def test_a_model_that_reads_no_token_ids_is_refused_saying_so(tmp_path):
    """Perceiver's base model requires `inputs`, values a preprocessor makes, not token ids, and a checkpoint saved
    as the base model has no text preprocessor: it is refused with that reason, not with its forward's TypeError."""
    from tests.tiny_models import save_tiny_perceiver

    save_tiny_perceiver(tmp_path, "PerceiverModel")
    with pytest.raises(explorer.ModelLoadError, match=r"does not read token ids: its forward requires `inputs`"):
        explorer.load_model(tmp_path, device=DEVICE)


def test_a_perceiver_saved_as_its_masked_lm_loads_as_that_masked_lm(tmp_path):
    """Perceiver's text checkpoints are its masked LM, whose text preprocessor reads token ids (its base model reads
    none): an encoder loads as that class where its checkpoint was saved as it, with its own weights. Its config
    names no layer or head count: those of the maps it returns, and the latent array its layers run over is found."""
    import torch

    from tests.tiny_models import save_tiny_perceiver

    saved = save_tiny_perceiver(tmp_path, num_latents=5)
    lm = explorer.load_model(tmp_path, device=DEVICE)
    assert (type(lm.model).__name__, lm.kind, lm.latents) == ("PerceiverForMaskedLM", "encoder", 5)
    ids = lm.tokenizer("the cat sat on the mat", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        own = saved(input_ids=ids, output_attentions=True)
        loaded = lm.model(input_ids=ids.to(DEVICE)).logits.cpu()
    torch.testing.assert_close(loaded, own.logits, rtol=0, atol=1e-6)
    assert (lm.num_layers, lm.num_heads) == (len(own.attentions), own.attentions[0].shape[1]) == (2, 2)


def test_loading_reports_its_stages(tiny_models):
    stages = []
    explorer.load_model(tiny_models["gpt2"], device=DEVICE, progress=stages.append)
    assert stages == [
        "Loading the decoder weights…",
        f"Moving the model to {DEVICE} and checking that its attention can be captured…",
    ]


def test_a_hub_download_announces_its_size(monkeypatch):
    """The Hub says how big the weights are; the stage says it before the (here impossible) download."""
    from types import SimpleNamespace

    import huggingface_hub

    files = [
        SimpleNamespace(rfilename="model.safetensors", size=548_105_171),
        SimpleNamespace(rfilename="pytorch_model.bin", size=548_118_077),  # not fetched: safetensors wins
    ]
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, *a, **k: SimpleNamespace(siblings=files))
    monkeypatch.setattr("explorer.models.loading._load_config", lambda name, source, hub=None: TINY["gpt2"][1]())
    monkeypatch.setattr("explorer.models.loading._load_tokenizer", lambda name, source, hub=None: None)

    def offline(name, source, kind, hub=None, placement=None, auto_class=None):
        raise explorer.ModelLoadError("no network here")

    monkeypatch.setattr("explorer.models.loading._load_weights", offline)
    stages = []
    with pytest.raises(explorer.ModelLoadError):
        explorer.load_model("someone/some-model", progress=stages.append)
    assert stages == [
        "Asking the Hugging Face Hub about “someone/some-model”…",
        "Downloading and loading the decoder weights (548 MB)…",
    ]


@pytest.mark.parametrize("content", ["empty", "random files"])
def test_a_folder_without_a_model_says_so(tmp_path, content):
    """Not an unknown architecture, nor a `model_type` key to add: the folder holds no model."""
    if content == "random files":
        (tmp_path / "notes.txt").write_text("shopping list")
        (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    with pytest.raises(explorer.ModelLoadError) as error:
        explorer.load_model(str(tmp_path))
    message = str(error.value)
    assert "holds no model" in message
    assert "model_type" not in message and "architecture" not in message


# -- bad input to the Python API (issue 39): an InputError or ModelLoadError that says what to change -------------


@pytest.fixture
def loads_nothing(monkeypatch):
    """A load that reaches the model's files fails the test: bad arguments are refused before that."""
    monkeypatch.setattr(
        "explorer.models.loading._load_config", lambda *args, **kwargs: pytest.fail("read the model's config")
    )


@pytest.mark.parametrize(
    "name",
    ["a" * 256, "x" * 5_000, "/tmp/" + "b" * 300, "org/" + "a" * 300],
    ids=["256-characters", "5000-characters", "a-300-character-folder", "a-300-character-id"],
)
def test_a_name_neither_hub_id_nor_folder_is_refused_in_a_sentence(name):
    with pytest.raises(explorer.ModelLoadError) as refused:
        explorer.load_model(name, device="cpu")  # the file system refuses names over 255 bytes: an OSError
    message = str(refused.value)
    assert "neither a Hugging Face Hub id" in message and "nor a folder" in message
    assert len(message) < 400  # the name is quoted shortened: a sentence, not a dump


@pytest.mark.parametrize(
    ("device", "says"),
    [
        ("cuda", 'use device="cpu"'),  # a CPU machine: AssertionError "Torch not compiled with CUDA enabled"
        ("cuda:1", 'use device="cpu"'),
        ("mps", 'use device="cpu"'),
        ("nonsense", 'use "auto"'),  # RuntimeError "Expected one of cpu, cuda, ... device type"
        ("", 'use "auto"'),
        (3, 'a name such as "cpu"'),
        (None, 'a name such as "cpu"'),
    ],
)
def test_a_device_this_machine_lacks_is_refused_before_loading(monkeypatch, tiny_models, loads_nothing, device, says):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU machine, whatever runs the tests
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(explorer.ModelLoadError, match="device") as refused:
        explorer.load_model(tiny_models["gpt2"], device=device)
    assert says in str(refused.value)


def test_a_gpu_this_machine_lacks_is_named_with_those_it_has(monkeypatch, tiny_models, loads_nothing):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(explorer.ModelLoadError, match=r"has 2 CUDA GPU\(s\) \(cuda:0 to cuda:1\)"):
        explorer.load_model(tiny_models["gpt2"], device="cuda:7")


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("{not json", "not valid JSON (line 1, column 2"),
        ('{"model_type": "gpt2",', "not valid JSON"),
        ("[1, 2]", "holds a JSON list"),
        (b"\xff\xfe{", "not valid JSON"),
    ],
    ids=["malformed", "cut-short", "a-list", "not-utf8"],
)
def test_a_malformed_config_json_is_called_malformed_not_missing(tmp_path, config, says):
    path = tmp_path / "config.json"
    path.write_bytes(config if isinstance(config, bytes) else config.encode())
    with pytest.raises(explorer.ModelLoadError) as refused:
        explorer.load_model(str(tmp_path), device="cpu")
    message = str(refused.value)
    assert "config.json" in message and "is malformed" in message and says in message
    assert "not a model id" not in message and "no config.json" not in message


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_models):
    return explorer.load_model(tiny_models["gpt2"], device=DEVICE)


@pytest.mark.parametrize("seed", [2**70, 2**64, -1, "abc", "5", 1.5, True])
def test_a_seed_manual_seed_cannot_take_is_an_input_error(tiny_gpt2, seed):
    with pytest.raises(explorer.InputError, match=r"seed must be a whole number from 0 to 2\*\*64 - 1"):
        explorer.decode(tiny_gpt2, "the cat", strategy="sample", seed=seed, max_new_tokens=2)


def test_the_largest_seed_manual_seed_takes_samples():
    import numpy as np

    from explorer.checks import given_seed

    assert given_seed(2**64 - 1) == 2**64 - 1 and given_seed(np.int64(5)) == 5 and given_seed(0) == 0


TEXT_CALLS = {
    "capture": lambda lm, text: explorer.capture(lm, text),
    "capture-pair": lambda lm, text: explorer.capture(lm, "the cat", text_pair=text),
    "tokenize": lambda lm, text: explorer.tokenize(lm, text),
    "decode": lambda lm, text: explorer.decode(lm, text, strategy="greedy", max_new_tokens=2),
    "next_token_distribution": lambda lm, text: explorer.next_token_distribution(lm, text),
    "head_ablation_effects": lambda lm, text: explorer.head_ablation_effects(lm, text),
    "kv_cache": lambda lm, text: explorer.kv_cache(lm, text, steps=1),
    "logit_lens": lambda lm, text: explorer.logit_lens(lm, text),
    "patch": lambda lm, text: explorer.patch(lm, "the cat", text),
    "attribute": lambda lm, text: explorer.attribute(lm, text, method="gradient_x_input"),
}
BAD_TEXTS = {
    "an-int": (12345, "must be a string (str), not int"),
    "bytes": (b"the cat", "must be a string (str), not bytes"),
    "a-lone-surrogate": ("the \ud800 cat", "lone surrogate (U+D800 at character 4)"),
}


@pytest.mark.parametrize("call", sorted(TEXT_CALLS))
@pytest.mark.parametrize("bad", sorted(BAD_TEXTS))
def test_text_that_is_not_text_is_an_input_error_saying_so(tiny_gpt2, call, bad):
    text, says = BAD_TEXTS[bad]
    with pytest.raises(explorer.InputError) as refused:
        TEXT_CALLS[call](tiny_gpt2, text)
    assert says in str(refused.value)
