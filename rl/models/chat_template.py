"""The Jinja chat template of our tiny checkpoints: the same text `rl/chat/format.py` renders (Qwen3
non-thinking turns, tools listed in the system turn, hermes `<tool_call>` blocks, tool results in one
user turn), written into `tokenizer_config.json` so that any engine that renders prompts from the
checkpoint's own template (vLLM's OpenAI server) prompts the model as it was trained.

Every assistant turn opens with the empty think block, as the trace builder writes it (the official
Qwen3 template drops it from earlier turns; ours never re-renders, so it must keep it).
"""

from __future__ import annotations

from rl.chat.format import EMPTY_THINK, IM_END, IM_START, TOOLS_POSTAMBLE, TOOLS_PREAMBLE


def _lit(text: str) -> str:
    """`text` as a Jinja string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


CHAT_TEMPLATE = (
    "{%- set has_system = messages and messages[0].role == 'system' -%}"
    "{%- if tools -%}"
    f"{{{{ {_lit(IM_START + 'system' + chr(10))} }}}}"
    "{%- if has_system -%}{{ messages[0].content or '' }}{%- endif -%}"
    f"{{{{ {_lit(TOOLS_PREAMBLE)} }}}}"
    "{%- for tool in tools -%}{{ '\\n' }}{{ tool | tojson }}{%- endfor -%}"
    f"{{{{ {_lit(TOOLS_POSTAMBLE + IM_END + chr(10))} }}}}"
    "{%- elif has_system -%}"
    f"{{{{ {_lit(IM_START + 'system' + chr(10))} + (messages[0].content or '') + {_lit(IM_END + chr(10))} }}}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' and loop.first -%}"
    "{%- elif m.role == 'assistant' -%}"
    f"{{{{ {_lit(IM_START + 'assistant' + chr(10) + EMPTY_THINK)} }}}}"
    "{%- set text = (m.content or '') | trim -%}"
    "{{ text }}"
    "{%- for call in (m.tool_calls or []) -%}"
    "{%- set fn = call.function if call.function is defined else call -%}"
    "{%- if text or not loop.first -%}{{ '\\n' }}{%- endif -%}"
    "{{ '<tool_call>\\n{\"name\": ' }}{{ fn.name | tojson }}{{ ', \"arguments\": ' }}"
    "{%- if fn.arguments is string -%}{{ fn.arguments }}{%- else -%}{{ (fn.arguments or {}) | tojson }}{%- endif -%}"
    "{{ '}\\n</tool_call>' }}"
    "{%- endfor -%}"
    f"{{{{ {_lit(IM_END + chr(10))} }}}}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}"
    f"{{{{ {_lit(IM_START + 'user' + chr(10))} }}}}"
    "{%- else -%}{{ '\\n' }}{%- endif -%}"
    "{{ '<tool_response>\\n' }}{{ m.content or '' }}{{ '\\n</tool_response>' }}"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}"
    f"{{{{ {_lit(IM_END + chr(10))} }}}}"
    "{%- endif -%}"
    "{%- else -%}"
    f"{{{{ {_lit(IM_START)} + m.role + '\\n' + (m.content or '') + {_lit(IM_END + chr(10))} }}}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    f"{{{{ {_lit(IM_START + 'assistant' + chr(10) + EMPTY_THINK)} }}}}"
    "{%- endif -%}"
)
