"""Token labels stay readable: byte-level BPE spaces, split characters, newlines, WordPiece pieces."""

from __future__ import annotations

from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from explorer.models.tokens import token_labels


def _byte_level_tokenizer() -> PreTrainedTokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["time flies like an arrow; fruit flies like a banana"] * 20, vocab_size=300)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer)


def test_byte_level_bpe_labels_are_the_text_they_stand_for():
    tokenizer = _byte_level_tokenizer()
    ids = tokenizer("time flies\nlike")["input_ids"]
    labels = token_labels(tokenizer, ids)
    assert "".join(labels).replace("↵", "\n") == "time flies\nlike"
    assert " flies" in labels and "Ġflies" not in labels
    assert "↵" in labels  # a bare newline is made visible


def test_split_multibyte_character_keeps_raw_pieces():
    tokenizer = _byte_level_tokenizer()
    ids = tokenizer("🙂")["input_ids"]  # unseen: one token per UTF-8 byte
    labels = token_labels(tokenizer, ids)
    assert len(labels) == 4
    assert all("\ufffd" not in label for label in labels)


def test_repeated_tokens_keep_identical_labels(minilm):
    """Positions, not labels, identify tokens: the views use indices, so repeats stay distinct."""
    labels = token_labels(minilm.tokenizer, minilm.tokenizer("the cat saw the cat")["input_ids"])
    assert labels == ("[CLS]", "the", "cat", "saw", "the", "cat", "[SEP]")


def test_wordpiece_continuations_keep_their_marker(minilm):
    labels = token_labels(minilm.tokenizer, minilm.tokenizer("tokenization")["input_ids"])
    assert any(label.startswith("##") for label in labels)
