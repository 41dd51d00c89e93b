"""Hosted mode and crafted input: names checked before the disk or the Hub is asked, limits from the environment,
no server token for visitors' models, one download at a time, and every echo of visitor text shown literally."""

from __future__ import annotations

import gc
import html
import re
import threading
import weakref
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.hosting import DownloadGate, HostingPolicy, hub_parameter_count
from explorer.serving import ForwardGate, freeze_long_lived
from explorer.ui.text import literal

HOSTED = HostingPolicy(hosted=True, max_parameters=200_000_000, max_text_chars=2_000, max_beams=4)
LOCAL = HostingPolicy()
PHISHING = "x` [Your session expired, log in again](https://evil.example) ![i](https://evil.example/i.png) `"


def test_policy_from_the_environment():
    assert HostingPolicy.from_env({}) == LOCAL
    hosted = HostingPolicy.from_env({"EXPLORER_HOSTED": "1", "EXPLORER_MODELS": "gpt2, bert-base-uncased"})
    assert hosted.hosted and hosted.allowed_models == {"gpt2", "bert-base-uncased"}
    assert (hosted.max_parameters, hosted.max_text_chars, hosted.max_beams) == (200_000_000, 2_000, 4)
    assert HostingPolicy.from_env({"EXPLORER_HOSTED": "true", "EXPLORER_MAX_PARAMS": "5e8"}).max_parameters == 5 * 10**8


@pytest.mark.parametrize(
    ("policy", "environ", "megabytes"),
    [(LOCAL, {}, 1024), (HOSTED, {}, 512), (HOSTED, {"EXPLORER_CACHE_MB": "300"}, 300)],
)
def test_the_results_budget_is_smaller_on_a_class_server(monkeypatch, policy, environ, megabytes):
    from explorer import gateway as caches

    monkeypatch.setattr(caches, "POLICY", policy)
    monkeypatch.delenv("EXPLORER_CACHE_MB", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    caches.results_cache.cache_clear()
    try:
        assert caches.results_cache().budget == megabytes * 1024 * 1024
    finally:
        caches.results_cache.cache_clear()  # the next call builds the process's own from the real settings


@pytest.mark.parametrize(
    "name",
    [
        "a/b/c d!",
        "x" * 5_000,
        "../../etc",
        "/root/.ssh",
        "file:///etc/passwd",
        "https://evil.example/model",
        "javascript:alert(1)",
        PHISHING,
        "<img src=x onerror=alert(1)>",
        "~/models",
        "a/../b",
        "gpt2\x00",
    ],
)
def test_hosted_mode_accepts_only_hub_ids(name):
    with pytest.raises(explorer.ModelLoadError) as refused:
        HOSTED.check_model_name(name)
    assert len(str(refused.value)) < 400  # a sentence, not a dump


def test_hosted_mode_answers_existing_and_missing_folders_alike(tmp_path):
    existing, missing = str(tmp_path), str(tmp_path / "missing")
    answers = []
    for name in (existing, missing):
        with pytest.raises(explorer.ModelLoadError) as refused:
            HOSTED.check_model_name(name)
        # The quoted name may be shortened (long temporary paths): compare what is said about it.
        answers.append(re.sub(r"“[^”]*”", "“NAME”", str(refused.value)))
    assert answers[0] == answers[1]


def test_valid_names_pass():
    for name in ("gpt2", "openai-community/gpt2", "google-t5/t5-small", "bert-base-uncased"):
        assert HOSTED.check_model_name(f"  {name} ") == name
    assert LOCAL.check_model_name("/tmp") == "/tmp"  # locally, folders are fine
    assert HOSTED.check_model_name("bundled/prose-gpt2", bundled={"bundled/prose-gpt2"}) == "bundled/prose-gpt2"
    allow = HostingPolicy(hosted=True, allowed_models=frozenset({"gpt2"}))
    with pytest.raises(explorer.ModelLoadError, match="not offered on this server"):
        allow.check_model_name("openai-community/gpt2")


def test_locally_a_malformed_id_is_a_sentence_not_a_traceback():
    # Refused by the length and id rules themselves, before any file-system call: as root, or on a file system
    # with long names, no path-length error would come to refuse them.
    expected = {"a/b/c d!": "neither a Hugging Face Hub id", "x" * 5_000: "too long", "a--b": "Hub id"}
    for name, reason in expected.items():
        with pytest.raises(explorer.ModelLoadError, match=reason):
            LOCAL.check_model_name(name)


def test_parameter_count_from_hub_metadata():
    assert hub_parameter_count(SimpleNamespace(safetensors=SimpleNamespace(total=124_439_808), siblings=[]))[0] == (
        124_439_808
    )
    files = [SimpleNamespace(rfilename="pytorch_model.bin", size=1_000), SimpleNamespace(rfilename="a/b.bin", size=9)]
    assert hub_parameter_count(SimpleNamespace(safetensors=None, siblings=files)) == (
        500,
        "estimated from the weight files' size",
    )


def test_a_model_over_the_cap_is_refused_before_download_and_no_token_is_used(monkeypatch):
    import huggingface_hub

    seen = {}

    def model_info(self, repo, **kwargs):
        seen.update(kwargs)
        return SimpleNamespace(safetensors=SimpleNamespace(total=7_000_000_000), siblings=[])

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr("explorer.models.loading._load_config", lambda *a, **k: pytest.fail("downloaded config"))
    with pytest.raises(explorer.ModelLoadError, match="7,000 million parameters"):
        explorer.load_model("someone/huge-model", token=False, max_parameters=200_000_000)
    assert seen["token"] is False  # the server's own token is never sent for a visitor's model


def test_one_download_at_a_time():
    gate = DownloadGate()
    assert gate.try_start("gpt2")
    assert not gate.try_start("bert-base-uncased")
    assert "being downloaded" in gate.busy_message()
    assert "gpt2" not in gate.busy_message()  # another visitor's choice is theirs
    gate.finish()
    assert gate.try_start("bert-base-uncased")


def test_forward_gate_bounds_concurrency():
    gate = ForwardGate(2)
    peak, lock, running = [0], threading.Lock(), [0]
    release = threading.Event()

    def work():
        with gate.slot():
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            release.wait(2)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for _ in range(100):
        if gate.waiting == 4:
            break
        threading.Event().wait(0.01)
    assert gate.running == 2 and gate.waiting == 4 and gate.busy
    release.set()
    for thread in threads:
        thread.join()
    assert peak[0] == 2 and gate.running == 0 and gate.waiting == 0


class _Node:
    """An object the cyclic collector must find: it refers to itself."""

    def __init__(self):
        self.me = self


def test_after_a_model_load_what_lives_is_frozen_and_garbage_is_freed():
    garbage = _Node()
    gone = weakref.ref(garbage)
    kept = _Node()
    del garbage
    try:
        freeze_long_lived()
        assert gone() is None  # collected before the freeze, not kept forever
        assert gc.get_freeze_count() > 0
        assert not any(obj is kept for obj in gc.get_objects())  # frozen: out of the collector's reach
        later = _Node()
        assert any(obj is later for obj in gc.get_objects())  # what comes after is collected as usual
    finally:
        gc.unfreeze()


def shown(markdown: str) -> str:
    """What a reader sees of Markdown whose punctuation was backslash-escaped (word joiners are invisible)."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")


def test_literal_markdown_shows_exactly_the_text():
    for text in (PHISHING, "**bold** _it_ $x^2$ <b>b</b> # h\n> q | t | [a](javascript:x)"):
        escaped = literal(text)
        assert shown(escaped) == text.replace("\n", " ")
        assert not re.search(r"(?<!\\)[\[\]()`*_<>$#|]", escaped)  # every markup character escaped


def start(**params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=90)
    at.query_params.update(params)
    return at.run()


@pytest.mark.parametrize("name", [PHISHING, "a/b/c d!", "x" * 5_000, "<script>alert(1)</script>"])
def test_crafted_model_links_give_a_literal_message_and_a_valid_view(name):
    at = start(model=name, layer="999", head="-1")
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER  # the bundled encoder instead
    errors = [error.value for error in at.sidebar.error]
    assert errors and all("](" not in re.sub(r"\\.", "", error) for error in errors)  # no live Markdown link
    assert name[:40] in shown(errors[0]) or "too long" in errors[0]
    assert at.get("plotly_chart")  # and the page still shows a chart
    notices = " ".join(info.value for info in at.info)
    assert "Layer 999 does not exist" in notices and "not a valid index" in notices


def test_hosted_mode_refuses_local_folders_in_the_app(monkeypatch, tiny_models):
    import explorer.ui.models as models

    monkeypatch.setattr(models, "POLICY", HOSTED)
    at = start(model=tiny_models["gpt2"])
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER
    assert "not a Hugging Face Hub id" in shown(at.sidebar.error[0].value)


def _fake_hub_cache(root, repo_id: str, model_folder) -> None:
    """A Hugging Face cache holding ``repo_id`` as huggingface_hub lays it out (refs/main -> snapshots/<rev>)."""
    import shutil

    repo = root / f"models--{repo_id.replace('/', '--')}"
    revision = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    shutil.copytree(model_folder, repo / "snapshots" / revision)


def test_hosted_loading_never_reads_a_working_directory_folder(monkeypatch, tmp_path, tiny_models):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_models["gpt2"], tmp_path / "org" / "model")  # a folder named like a Hub id
    answers = []
    for name in ("org/model", "org/missing"):
        with pytest.raises(explorer.ModelLoadError) as refused:
            explorer.load_model(name, device="cpu", token=False, max_parameters=10**9, hub_only=True)
        answers.append(str(refused.value).replace(name, "NAME"))
    assert answers[0] == answers[1]  # no existence oracle
    assert explorer.load_model("org/model", device="cpu").num_layers == 2  # locally, folders stay fine


def test_hosted_loading_uses_the_hub_cache(monkeypatch, tmp_path, tiny_models):
    import huggingface_hub

    _fake_hub_cache(tmp_path / "hub", "org/tiny-llama", tiny_models["llama"])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    lm = explorer.load_model("org/tiny-llama", device="cpu", token=False, max_parameters=10**9, hub_only=True)
    assert lm.name == "org/tiny-llama" and lm.num_layers == 2


def test_hosted_loading_refuses_a_model_of_unknown_size(monkeypatch):
    import huggingface_hub

    def model_info(self, repo, **kwargs):
        return SimpleNamespace(safetensors=None, siblings=[SimpleNamespace(rfilename="config.json", size=10)])

    def snapshot_download(repo, **kwargs):
        if not kwargs.get("local_files_only"):
            pytest.fail("downloaded a model whose size is unknown")
        raise huggingface_hub.errors.LocalEntryNotFoundError("not cached")

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    with pytest.raises(explorer.ModelLoadError, match="does not say how large"):
        explorer.load_model("someone/mystery", token=False, max_parameters=200_000_000, hub_only=True)


def test_literal_breaks_every_autolink_and_reads_the_same():
    text = "Visit https://evil.invalid/login or HTTP://x.y or www.evil.invalid or admin@evil.invalid"
    shown = literal(text)
    assert shown.replace("\u2060", "").replace("\\", "") == text  # what a reader sees is unchanged
    for address in ("https:", "http:", "www.", "@e"):
        assert address not in shown.lower().replace("\\", "")


def test_streamlits_clear_cache_request_leaves_models_and_results():
    """What Streamlit runs for a visitor's clear-cache message (AppSession._handle_clear_cache_request)."""
    from streamlit.runtime import caching

    from explorer import gateway, ui
    from explorer.ui.caches import results_cache

    model = ui.cached_model(explorer.DEFAULT_ENCODER)
    capture = gateway.run("capture", explorer.DEFAULT_ENCODER, "a sentence kept for the class")
    caching.cache_data.clear()
    caching.cache_resource.clear()
    assert ui.cached_model(explorer.DEFAULT_ENCODER) is model
    assert gateway.run("capture", explorer.DEFAULT_ENCODER, "a sentence kept for the class") is capture
    assert len(results_cache()) >= 1


def test_prefetched_and_bundled_models_never_wait_on_the_download_gate(monkeypatch, tmp_path, tiny_models):
    import huggingface_hub

    import explorer.ui.models as models
    from explorer import gateway
    from explorer.hosting import DOWNLOADS

    _fake_hub_cache(tmp_path / "hub", "org/prefetched", tiny_models["gpt2"])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(models, "POLICY", HOSTED)
    monkeypatch.setattr(gateway, "POLICY", HOSTED)  # the load itself: no token, Hub ids only
    assert DOWNLOADS.try_start("someone/big-model")  # another visitor's download is under way
    try:
        slot = SimpleNamespace(status=lambda *a, **k: _NullStatus())
        assert models._load_once("org/prefetched", slot).name == "org/prefetched"
        assert models._load_once(explorer.DEFAULT_DECODER, slot).name == explorer.DEFAULT_DECODER
        with pytest.raises(explorer.ModelLoadError, match="being downloaded") as refused:
            models._load_once("org/not-here", slot)
        assert "someone/big-model" not in str(refused.value)
    finally:
        DOWNLOADS.finish()


class _NullStatus:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, **kwargs):
        pass


@pytest.mark.parametrize(
    ("prompt", "continuation"),
    [
        ("It was that", '. "Well, sir," said'),
        ("It was that", " the most of the world,"),
        ("Visit", ":) **now** https://evil.example"),
        ("Plain", "words"),
    ],
)
def test_generated_text_is_bold_whatever_it_starts_with(prompt, continuation):
    """Rendered by a CommonMark parser (Streamlit's is one too): the continuation bold, no stars left over."""
    from markdown_it import MarkdownIt

    from explorer.ui.text import prompt_and_continuation

    rendered = MarkdownIt("commonmark").render(prompt_and_continuation(prompt, continuation))
    assert "*" not in re.sub(r"<strong>.*</strong>", "", rendered, flags=re.S)
    strong = re.search(r"<strong>(.*)</strong>", rendered, re.S)
    assert strong and html.unescape(strong[1]).replace("\u2060", "") == continuation.strip()


@pytest.mark.parametrize("name", ["gpt2\x00", "\x1b[31mgpt2", "gpt2\nnext line", "gpt2\x9b"])
@pytest.mark.parametrize("policy", [LOCAL, HOSTED], ids=["local", "hosted"])
def test_a_name_with_control_characters_is_refused_as_such_and_shown_visibly(policy, name):
    with pytest.raises(explorer.ModelLoadError, match="holds control characters") as refused:
        policy.check_model_name(name)
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", str(refused.value))  # shown as ␀, ␛, ␊ or \x9B: not obeyed
