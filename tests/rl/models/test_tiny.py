"""Small BPE tokenizer and the tiny Qwen3 recipe: exact round trips, special tokens, save and reload."""

import json

import torch

from rl.chat.format import SPECIAL_TOKENS, render_conversation
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model, load_model_folder, n_parameters, save_model_folder
from rl.models.tokenizer import decode, encode, load_tokenizer, train_bpe

SMALL = TinyQwen3Recipe(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                        head_dim=32, intermediate_size=128)


def _corpus(n=200):
    out = []
    for i in range(n):
        msgs = [{"role": "system", "content": "You are a store agent."},
                {"role": "user",
                 "content": f"Hi, I am Yusuf Rossi, zip {19122 + i}. Cancel order #W{2000000 + 7 * i}."},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {
                    "name": "find_user_id_by_name_zip",
                    "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": str(19122 + i)}}}]},
                {"role": "tool", "content": f"yusuf_rossi_{9620 + i}"}]
        out.append(render_conversation(msgs, [{"type": "function", "function": {"name": "think"}}]))
    return out


def test_bpe_round_trip_and_special_tokens():
    corpus = _corpus()
    tok = train_bpe(corpus, vocab_size=600)
    for s in SPECIAL_TOKENS:
        assert len(encode(tok, s)) == 1, s
    for text in corpus[:20] + ["unseen ünïcode ✓ text\n\n  spaced", "<tool_call>\n{\"a\": 1}</tool_call>"]:
        assert decode(tok, encode(tok, text)) == text
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    # digits are single tokens, so ids are copied digit by digit
    assert all(len(t.lstrip("Ġ")) <= 1 for t in tok.convert_ids_to_tokens(encode(tok, " 2000014")))


def test_tiny_model_save_reload(tmp_path):
    tok = train_bpe(_corpus(), vocab_size=600)
    model = build_tiny_model(tok, SMALL)
    assert model.config.vocab_size == len(tok)
    assert n_parameters(build_tiny_model(tok, TinyQwen3Recipe())) > 1_000_000  # the default recipe is ~MBs
    folder = save_model_folder(model, tok, tmp_path / "tiny", {"recipe": SMALL.model_dump(), "kind": "tiny"})
    assert (folder / "model.safetensors").exists() and (folder / "config.json").exists()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["parameters"] == n_parameters(model) and manifest["recipe"]["hidden_size"] == 64
    model2, tok2, manifest2 = load_model_folder(folder)
    assert manifest2 == manifest
    ids = torch.tensor([encode(tok, _corpus(1)[0])])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, model2(ids).logits, atol=1e-5)
    assert encode(tok2, _corpus(3)[2]) == encode(tok, _corpus(3)[2])
    assert load_tokenizer(folder).padding_side == "left"
