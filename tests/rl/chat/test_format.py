"""Qwen3 hermes chat format: rendering with tools, and parsing (including malformed) tool calls."""

import json

from rl.chat.format import (
    GENERATION_PROMPT,
    parse_reply,
    render_conversation,
    render_messages,
)

TOOLS = [{"type": "function", "function": {"name": "get_order_details", "description": "Get an order.",
                                           "parameters": {"type": "object", "properties": {
                                               "order_id": {"type": "string"}}, "required": ["order_id"]}}}]


def test_render_with_tools_matches_qwen3_layout():
    messages = [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Where is #W1?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c0", "type": "function",
             "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": "#W1"})}}]},
        {"role": "tool", "tool_call_id": "c0", "content": '{"status": "pending"}'},
        {"role": "assistant", "content": "It is pending."},
    ]
    text = render_conversation(messages, TOOLS, add_generation_prompt=False)
    expected = (
        "<|im_start|>system\nBe helpful.\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(TOOLS[0]) + "\n</tools>\n\nFor each function call, return a json object with function "
        "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWhere is #W1?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1"}}\n</tool_call>'
        "<|im_end|>\n"
        '<|im_start|>user\n<tool_response>\n{"status": "pending"}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is pending.<|im_end|>\n"
    )
    assert text == expected
    assert render_conversation(messages[:2], TOOLS, add_generation_prompt=True).endswith(GENERATION_PROMPT)


def test_consecutive_tool_results_share_one_user_turn():
    messages = [{"role": "user", "content": "hi"},
                {"role": "tool", "content": "A"}, {"role": "tool", "content": "B"}]
    text = render_conversation(messages)
    assert text.endswith("<|im_start|>user\n<tool_response>\nA\n</tool_response>\n"
                         "<tool_response>\nB\n</tool_response><|im_end|>\n")


def test_assistant_pieces_are_exactly_what_the_agent_writes():
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Sure.", "tool_calls": [
                    {"function": {"name": "think", "arguments": {"thought": "x"}}}]}]
    pieces = render_messages(messages)
    agent = [t for k, t in pieces if k == "assistant"]
    assert agent == ['Sure.\n<tool_call>\n{"name": "think", "arguments": {"thought": "x"}}\n</tool_call>'
                     "<|im_end|>"]
    parsed = parse_reply(agent[0])
    assert parsed.content == "Sure."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("think", {"thought": "x"})]


def test_parse_plain_text_and_several_calls():
    assert parse_reply("Hello there.<|im_end|>").content == "Hello there."
    reply = parse_reply('<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
                        '<tool_call>\n{"name": "b", "arguments": "{\\"x\\": 1}"}\n</tool_call>')
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("a", {}), ("b", {"x": 1})]
    assert reply.content == "" and not reply.errors
    assert reply.tool_calls[1].openai()["function"]["arguments"] == '{"x": 1}'


def test_malformed_calls_become_errors_never_exceptions():
    cases = [
        '<tool_call>\n{"name": "a", "arguments": {\n</tool_call>',    # bad JSON
        '<tool_call>\n["a"]\n</tool_call>',                          # not an object
        '<tool_call>\n{"arguments": {}}\n</tool_call>',               # no name
        '<tool_call>\n{"name": "a", "arguments": [1]}\n</tool_call>',  # arguments not an object
        '<tool_call>\n{"name": "a", "arguments": {}}',                # never closed
        "<tool_call>",                                                # empty
        "</tool_call></tool_call>\x00<tool_call>{{{{",                # junk
    ]
    for text in cases:
        reply = parse_reply(text)
        assert not reply.tool_calls, text
        assert len(reply.errors) == 1 or text.startswith("</tool_call>"), text
        assert all(e.message.startswith("Error: malformed tool call") for e in reply.errors)
    mixed = parse_reply('ok <tool_call>\nnope\n</tool_call><tool_call>\n{"name": "b"}\n</tool_call>')
    assert [c.name for c in mixed.tool_calls] == ["b"] and len(mixed.errors) == 1
    assert mixed.content == "ok"
