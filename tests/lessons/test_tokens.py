"""lessons.tokens: token ids shown as the pages show them. Special tokens are spelled out, a byte that is not valid
UTF-8 at its place is shown as ⟨0xNN⟩ (never U+FFFD), and complete characters decode normally."""

from __future__ import annotations

from lessons.tokens import BYTE, SPECIAL, TEXT, Piece, shown_text, token_pieces
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
