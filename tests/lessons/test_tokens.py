"""lessons.tokens: token ids shown as the pages show them. Special tokens are spelled out, a byte that is not valid
UTF-8 at its place is shown as ⟨0xNN⟩ (never U+FFFD), and complete characters decode normally."""

from __future__ import annotations

from lessons.tokens import BYTE, SPECIAL, TEXT, UNKNOWN, Piece, shown_text, token_label, token_pieces
from paged.model.tokenizer import BOS, EOS, SEP, ByteTokenizer

TOK = ByteTokenizer()


def test_complete_characters_and_specials():
    ids = [BOS] + list("中a".encode()) + [SEP, EOS]
    assert token_pieces(TOK, ids) == [Piece("⟨BOS⟩", SPECIAL), Piece("中a", TEXT), Piece("⟨SEP⟩", SPECIAL),
                                      Piece("⟨EOS⟩", SPECIAL)]
    assert shown_text(TOK, ids) == "中a" and shown_text(TOK, ids, specials=True) == "⟨BOS⟩中a⟨SEP⟩⟨EOS⟩"


def test_invalid_bytes_are_shown_by_value_not_as_replacement_characters():
    """0xE6 alone, half of 中 (E4 B8) and a stray continuation byte 0x80, each between ASCII letters."""
    ids = [ord("a"), 0xE6, ord("b"), 0xE4, 0xB8, ord("c"), 0x80]
    assert token_pieces(TOK, ids) == [Piece("a"), Piece("⟨0xE6⟩", BYTE), Piece("b"), Piece("⟨0xE4⟩", BYTE),
                                      Piece("⟨0xB8⟩", BYTE), Piece("c"), Piece("⟨0x80⟩", BYTE)]
    assert "\ufffd" not in shown_text(TOK, ids) and "\ufffd" in TOK.decode(ids)


def test_invisible_control_bytes_are_shown_too_newlines_and_tabs_stay():
    ids = list(b"p\x1bq\x03\n\tr\x7f")
    assert shown_text(TOK, ids) == "p⟨0x1B⟩q⟨0x03⟩\n\tr⟨0x7F⟩"


def test_a_subword_tokenizer_without_bytes_is_decoded_in_runs():
    class Words:
        bos_token_id, eos_token_id = 0, 1

        def decode(self, ids):
            return " ".join(f"w{i}" for i in ids)

    assert token_pieces(Words(), [0, 5, 6, 1]) == [Piece("⟨BOS⟩", SPECIAL), Piece("w5 w6"), Piece("⟨EOS⟩", SPECIAL)]


# --- a subword tokenizer (a local Hugging Face model's tokenizer.json) ----------------------------------------------
def _hf_tokenizer():
    """The byte-level BPE tokenizer tests/paged/hf_tiny.py trains (ids 0 <s>, 1 </s>, 2 <|endoftext|>), with a second
    eos id, as a generation_config.json listing two gives."""
    import importlib.util
    from pathlib import Path

    from paged.model.tokenizer import HFTokenizer

    spec = importlib.util.spec_from_file_location("hf_tiny", Path(__file__).parents[1] / "paged" / "hf_tiny.py")
    hf_tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hf_tiny)
    return HFTokenizer(hf_tiny.train_tokenizer(add_bos=True), 0, 1, eos_token_ids=[1, 2])


def test_subword_tokens_are_labelled_with_visible_whitespace_bytes_and_specials():
    """Each token's own text (its bytes read from the vocabulary, not the whole text's decode): a leading space as
    ␣, a newline as ↵, half of 中 (E4 B8 AD, one byte per token here) as ⟨0xNN⟩, both eos ids and <s> by name,
    a long piece cut with …."""

    tok = _hf_tokenizer()
    ids = tok.encode(" quick\n中")
    labels = [token_label(tok, i) for i in ids]
    assert labels[0] == "⟨BOS⟩"
    assert "".join(labels[1:]).startswith("␣quick↵") and all(len(label) <= 10 for label in labels)
    assert "".join(labels).endswith("⟨0xE4⟩⟨0xB8⟩⟨0xAD⟩") and "\ufffd" not in "".join(labels)
    assert [token_label(tok, i, max_chars=20) for i in (1, 2)] == ["⟨EOS⟩", "⟨<|endoftext|>⟩"]
    long_id = max(range(3, tok.vocab_size), key=lambda i: len(tok.id_to_token(i)))
    assert len(tok.id_to_token(long_id)) > 4
    assert token_label(tok, long_id, max_chars=4).endswith("…") and len(token_label(tok, long_id, max_chars=4)) == 4


def test_subword_text_keeps_a_split_character_as_bytes_and_names_every_eos():
    """A run of subword tokens decodes as the tokenizer decodes it; cut inside 中 it shows the bytes it has, never
    U+FFFD; a second eos id is a special piece, not silently dropped text."""
    tok = _hf_tokenizer()
    ids = tok.encode("fox 中", add_bos=False)
    assert shown_text(tok, ids) == tok.decode(ids) == "fox 中"
    cut = ids[:-1]  # the last byte of 中 missing
    assert "\ufffd" in tok.decode(cut)
    assert shown_text(tok, cut) == "fox ⟨0xE4⟩⟨0xB8⟩"
    assert token_pieces(tok, ids + [2]) == [Piece("fox 中"), Piece("⟨<|endoftext|>⟩", SPECIAL)]


def test_an_engine_demo_labels_every_token_of_every_sequence(tiny):
    """EngineLesson.token_texts: per sequence, the prompt as fed (⟨BOS⟩, its bytes, ⟨SEP⟩) then the generated
    tokens, each labelled alone; as long as the sequence's prompt + generated tokens."""
    from lessons.engine import EngineLesson
    from lessons.engine_requests import DemoConfig, RequestSpec

    model, tok = tiny
    demo = EngineLesson.replay(DemoConfig(), [RequestSpec("a b", max_tokens=3), RequestSpec("xy", "continue")], 2,
                             model, tok)
    texts = demo.token_texts()
    for sid, seq in demo.view.seqs.items():
        assert len(texts[sid]) == seq.prompt_len + len(seq.generated_token_ids)
    assert texts[0][:5] == ["⟨BOS⟩", "a", "␣", "b", "⟨SEP⟩"] and texts[1][:3] == ["⟨BOS⟩", "x", "y"]
    generated = demo.view.seqs[0].generated_token_ids
    assert texts[0][5:] == [token_label(tok, i) for i in generated]


def test_ids_past_the_vocabulary_and_control_characters_are_shown_not_dropped():
    """A model's embedding can have more rows than its tokenizer has tokens (the tiny checkpoint: 320 vs 300), and a
    random model samples such ids: decode drops them silently, the pages show ⟨#id⟩. A control character a subword
    token decodes to (0x14 is one byte-level token) is ⟨0x14⟩, as for the byte model; text around both stays."""
    tok = _hf_tokenizer()
    assert tok.id_to_token(305) is None and tok.decode([305]) == ""
    fox = tok.encode("fox", add_bos=False)
    ctrl = tok.token_to_id(chr(0x100 + 0x14))  # byte-level BPE writes byte 0x14 as U+0114
    assert tok.decode([ctrl]) == "\x14"
    ids = fox + [305, ctrl] + fox
    assert token_pieces(tok, ids) == [Piece("fox"), Piece("⟨#305⟩", UNKNOWN), Piece("⟨0x14⟩", BYTE), Piece("fox")]
    assert [token_label(tok, i) for i in (305, ctrl)] == ["⟨#305⟩", "⟨0x14⟩"]
