"""Byte tokenizer: round trips, special ids, streaming decode of split UTF-8, and the tokenizer.json wrapper."""

import json

import pytest

from paged.model.tokenizer import BOS, EOS, SEP, ByteTokenizer, HFTokenizer

pytestmark = pytest.mark.model

TEXTS = ["", "hello, world", "分页注意力 PagedAttention", "emoji 🚀🧠 and ünïcödé", "tabs\tand\nnewlines"]


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(text):
    """encode then decode gives back any text, including Chinese and emoji, with and without BOS."""
    tok = ByteTokenizer()
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(text, add_bos=False)) == text


def test_ids_are_utf8_bytes_and_special_ids():
    """Ids 0-255 are the UTF-8 bytes, BOS/EOS/SEP are 256/257/258, and decode skips special ids."""
    tok = ByteTokenizer()
    assert (BOS, EOS, SEP, tok.vocab_size) == (256, 257, 258, 259)
    assert (tok.bos_token_id, tok.eos_token_id, tok.sep_token_id) == (BOS, EOS, SEP)
    assert tok.encode("中a") == [BOS, 0xE4, 0xB8, 0xAD, ord("a")]
    assert tok.encode("a", add_bos=False) == [ord("a")]
    assert tok.decode([BOS, ord("h"), SEP, ord("i"), EOS]) == "hi"


def test_decode_invalid_utf8_uses_replacement_character():
    """A lone continuation byte decodes to U+FFFD instead of raising."""
    assert ByteTokenizer().decode([ord("a"), 0x80, ord("b")]) == "a\ufffdb"


def test_incremental_decoder_never_splits_a_character():
    """Streaming a 3-byte Chinese char and a 4-byte emoji byte by byte emits each only once it is complete."""
    tok = ByteTokenizer()
    dec = tok.incremental_decoder()
    ids = tok.encode("a中🚀", add_bos=True) + [EOS]
    pieces = [dec.push(i) for i in ids]
    assert pieces == ["", "a", "", "", "中", "", "", "", "🚀", ""]
    assert dec.flush() == ""


def test_incremental_decoder_flushes_an_incomplete_tail():
    """A stream cut mid-character yields U+FFFD on flush, not silently nothing."""
    dec = ByteTokenizer().incremental_decoder()
    assert [dec.push(i) for i in "中".encode()[:2]] == ["", ""]
    assert dec.flush() == "\ufffd"


def _word_level_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, "hello": 3, "world": 4}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.decoder = tokenizers.decoders.WordPiece()  # joins words with spaces
    tok.add_special_tokens(["<s>", "</s>"])
    return tok


def test_hf_tokenizer_wrapper_has_the_same_interface(tmp_path):
    """A tokenizer.json is wrapped with encode(add_bos)/decode/bos/eos, and saves back to tokenizer.json."""
    tok = HFTokenizer(_word_level_tokenizer(), bos_token_id=1, eos_token_id=2)
    assert tok.encode("hello world") == [1, 3, 4]
    assert tok.encode("hello", add_bos=False) == [3]
    assert tok.decode([1, 3, 4, 2]) == "hello world"
    tok.save(tmp_path)
    again = HFTokenizer.from_file(tmp_path / "tokenizer.json", 1, 2)
    assert again.encode("world hello") == [1, 4, 3]
    assert json.loads((tmp_path / "tokenizer.json").read_text())["model"]["type"] == "WordLevel"
    dec = again.incremental_decoder()
    assert "".join(dec.push(i) for i in [1, 3, 4]) + dec.flush() == "hello world"
