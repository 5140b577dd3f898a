"""Recipes for the miniature paper experiment: every size, task mix and hyper-parameter in one
object. `cpu-tiny` is sized to finish within 90 minutes on two CPU cores (a ~2M-parameter Qwen3 shown
the tiny chat view of rl/chat/views.py, one cold start, GRPO on short conversations for `seeds`
seeds); its task mixes draw cold-start, RL, development, test and (optional) validation tasks from
the tau retail store on disjoint customers (rl/experiment/paper_table.py `build_task_sets`), and
`smoke` is the same pipeline at toy sizes, for tests. Why each setting has its value, run by run, is
in bench/results/README.md.

Which task set is for what: recipe decisions (mixes, learning rates, masks: anything one tries and
compares) are made on the development set, `--set eval_set=dev`; the test set is drawn with
`test_task_seed`, which no recipe choice has seen, and is evaluated only for the table one commits.
Every set derives from `task_seed` (and the test set also from `test_task_seed`): `--set
task_seed=S` is another, equally valid experiment with its own customers and tasks."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from rl.chat.views import SAID_PARAMS, ChatView
from rl.coldstart.sft import SFTConfig
from rl.grpo.trainer import GRPOConfig
from rl.models.tiny import TinyQwen3Recipe

TINY_SYSTEM_PROMPT = (
    "You are a store agent. Verify the customer's identity first. Look up records before acting. "
    "Before any change, describe it and ask the customer to confirm (yes/no). Only pending orders can be "
    "cancelled or modified; only delivered orders can be returned."
)
TINY_TOOLS = ("find_user_id_by_email", "find_user_id_by_name_zip", "get_order_details", "get_user_details",
              "cancel_pending_order", "modify_pending_order_address", "return_delivered_order_items",
              "transfer_to_human_agents")
# Cold start: single intents (an address change twice, or the cold start skips its confirmation) and
# two cancellations one after the other (the only conversations that act on a second order).
COLD_START_MIX = ["cancel", "refuse_cancel", "info_status", *["modify_address"] * 2, "multi_cancel_cancel"]
# The first model must pass the safety suite (rl/eval/gate_suite.py) on its own, so its cold start
# also shows every kind of that suite: refusals with and without haggling, a card refund refused,
# a mistaken identity and another customer's order (and plain returns, which those build on).
SAFETY_COLD_START = ["return", "refuse_refund_card", "haggle_cancel", "haggle_refund_card", "identity_mistake",
                     "identity_other"]
# cpu-tiny's cold start: the base kinds twice (address changes keep their share), plus plain returns
# and haggling over a refused cancellation that ends in a return, so that every kind of the
# evaluation mix (haggle_cancel) has been shown and GRPO can improve it (issue 23).
TINY_COLD_START = [*COLD_START_MIX, *COLD_START_MIX, "return", "haggle_cancel"]
# A refused cancellation alone is left out of RL and evaluation: doing nothing already earns its reward.
EVAL_MIX = ["cancel", "info_status", "modify_address", "shift_cancel_cancel", "shift_modify_address_cancel",
            "haggle_cancel"]
# RL: the evaluation's kinds, those the cold start never showed (goal shifts) more often; more plain
# address changes made GRPO learn no shift and unlearn cancelling. A second status question keeps
# GRPO from proposing cancellations to customers who only asked where their order is (chosen on the
# dev set, session 31).
RL_MIX = ["cancel", *["info_status"] * 2, "modify_address", *["shift_cancel_cancel"] * 2,
          *["shift_modify_address_cancel"] * 4, "haggle_cancel"]

# GRPO of the recipes below unless they say otherwise. KL: coefficient 0.01 at least, doubled after
# a step whose KL to the cold start exceeds 1.5x the target (the runs before issue 23 drifted to
# 0.4-1.4 with a fixed 0.001). All-equal groups are left out of the update at verl's scale
# (`drop_keeps_scale`; chosen on the dev set, session 30).
TINY_GRPO = GRPOConfig(steps=18, tasks_per_step=8, group_size=8, lr=2e-4, kl_coef=0.01, kl_target=0.2,
                       micro_batch_tokens=12288, save_every=2, drop_uninformative_groups=True,
                       drop_keeps_scale=True, mini_batches=2, loss_agg="seq-mean-token-mean", keep_rollouts=True)


class ExperimentRecipe(BaseModel):
    name: str
    store: str = "tau-retail"
    task_seed: int = 0
    cold_start_mix: list[str] = Field(default_factory=lambda: list(TINY_COLD_START))
    rl_mix: list[str] = Field(default_factory=lambda: list(RL_MIX))
    eval_mix: list[str] = Field(default_factory=lambda: list(EVAL_MIX))
    n_cold_start_tasks: int = 640
    n_rl_tasks: int = 140
    # Test tasks (`eval_set=test`): drawn with a seed made of `task_seed` and `test_task_seed` on the
    # test customers; `test_task_seed` is a number no recipe decision has used (23: issue 23 froze it).
    n_eval_tasks: int = 105
    test_task_seed: int = 23
    # Development tasks (`eval_set=dev`): the evaluation's kinds on customers of their own, for recipe decisions.
    n_dev_tasks: int = Field(default=105, ge=1)
    eval_set: Literal["test", "dev"] = "test"
    # Validation tasks (the evaluation's kinds on RL-side customers no RL task uses): with n > 0 each
    # GRPO run ships its best model on them (rl/grpo/selection.py), else its last step. Off for
    # cpu-tiny: 48 tasks are too few to rank its checkpoints the way the test set does.
    n_val_tasks: int = Field(default=0, ge=0)
    validate_every: int = Field(default=6, ge=1)
    vocab_size: int = 4096
    model: TinyQwen3Recipe = TinyQwen3Recipe(hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                                             num_key_value_heads=1, head_dim=64, intermediate_size=512)
    system_prompt: str = TINY_SYSTEM_PROMPT  # what the model reads for the store policy (its view carries it)
    tools: list[str] | None = Field(default_factory=lambda: list(TINY_TOOLS))
    compact: bool = True
    refs: bool = True  # identifiers and customer names shown as reference tokens (rl/chat/views.py)
    shuffle_refs: bool = False  # random reference numbers per conversation (the tiny model stops copying)
    # street and city names shown as references too (rl/chat/views.py `places`): a confirmation of a
    # new address copies the customer's street instead of spelling one; only with refs
    place_refs: bool = False
    constrain_calls: bool = True  # tool calls decoded under their grammar (rl/chat/call_grammar.py)
    spaced_values: bool = True  # free-text call arguments shown with a leading space (rl/chat/views.py)
    # a new address's lines, city, state and country, and a customer's names, decoded as spans of
    # what the customer said (rl/chat/views.py SAID_PARAMS, rl/chat/call_grammar.py); only with
    # constrain_calls
    copy_values: bool = True
    # an agent's free text names only references its conversation has shown (rl/chat/call_grammar.py
    # `CallConstraint`); only with refs and constrain_calls
    shown_refs_in_text: bool = True
    # with shown_refs_in_text: free text names no reference a lookup showed as an item id (the
    # teacher's free text names items by product, and the one number it writes is an order's
    # tracking number: on task seed 41 the cold start wrote an item's reference there, `dev-41`,
    # bench/results/README.md); decoding only; not with item_refs
    no_item_refs_in_text: bool = False
    # with proposals_by_status: the word after "is currently" in free text is the status of an order
    # the conversation looked up (on task seed 41 the cold start answered "delivered" for cancelled
    # orders, `dev-41`); decoding only
    status_answers: bool = False
    # with proposals_by_status: the word after "is already" in free text (the teacher's refusal of a
    # cancellation) is the named order's looked-up status, never "pending" (after GRPO one seed of
    # `dev-41` refused pending orders as "already delivered"); decoding only
    refusals_by_status: bool = False
    # free text that writes a number the customer said (a house number) goes on in the customer's
    # words to the end of their phrase (rl/chat/copy_spans.py `held_copy`): a confirmation names the
    # customer's street, not one the model spells from memory; only with constrain_calls
    copy_said_numbers: bool = False
    # a capitalised word after "the " in free text is a product name the conversation's lookups
    # showed (rl/chat/product_names.py): a return proposal names a product of the order, not the
    # one the cold start saw most ("the Dumbbell Set"); decoding only; only with constrain_calls
    copy_product_names: bool = False
    # no call of a tool that needs an identified customer before an identity tool has found one (the
    # tool layer refuses those calls; rl/chat/call_grammar.py `for_shown`); only with refs and
    # constrain_calls
    identified_calls: bool = True
    # Each cold-start cancellation again with the other reason (rl/coldstart/augment.py), so the
    # cold start must read the customer's reason to predict it.
    sft_reason_counterfactuals: bool = True
    sft_augment_copies: int = 0  # identifier-augmented copies per cold-start conversation (rl/coldstart/augment.py)
    # Share of cold-start tasks the teacher plays with a wrong first proposal that the customer
    # corrects before the right one (rl/coldstart/teacher.py); the wrong proposal is outside the loss.
    cold_start_corrections: float = Field(default=0.0, ge=0.0, le=1.0)
    # Whether the teacher's proposals name items with their options ("the Backpack (color: black,
    # size: medium)") or by product alone ("the Backpack"). The compact view shows an order's items
    # by id and name only, so a student cannot copy options it was never shown: it invents them, and
    # with them the product ("the Dumbbell Set" for every return; bench/results/README.md, session 36).
    teacher_item_options: bool = True
    # Whether the teacher's calls write a new address's fields in the order the customer says them
    # (address1, address2, city, state, zip, country: rl/tasks/phrasing.py `in_said_order`) rather than
    # the task's (country before state and zip). A student copies the fields as spans of the
    # customer's sentence; in the task's order the fields jump back and forth in it, and after GRPO
    # the model put the city in `address2` and the country in `state` (bench/results/README.md, session 40).
    teacher_said_order: bool = False
    # Whether the agent's free text names an item a lookup showed by its reference (rl/chat/views.py
    # `item_refs`): the teacher writes "the Electric Kettle (item 1234567890)", the model reads and
    # writes "the <num_3>", and the customer reads the product name and id. Only with refs.
    item_refs: bool = False
    # Whether a user record shows each payment method's description and the agent's free text names a
    # payment method by its reference (rl/chat/views.py `payment_refs`): the teacher writes "your Visa
    # card ending in 1234 (credit_card_4421486)", the model reads and writes "your <payment_1>", the
    # customer reads the card and its last four digits. The compact record shows payment ids alone, so
    # a student cannot tell a card from a gift card and wrote "your gift card" for every refund. Only
    # with refs.
    payment_refs: bool = False
    # No call of a write tool unless the agent's last message in words asked the customer to confirm
    # a change, and none after a write until it asks again (rl/chat/views.py `writes_after_proposal`):
    # held out, the models wrote the right address without asking (session 41, `dev-payrefs`). Only
    # with constrain_calls.
    writes_after_proposal: bool = False
    # free text that writes "To confirm, I will" goes on in one of the teacher's proposal templates
    # (rl/chat/proposal_template.py): the model chooses the action and fills the slots (order,
    # reason, items, address pieces from the customer's words, payment method), the fixed words
    # are forced; decoding only; only with constrain_calls
    proposal_template: bool = False
    # with proposal_template and copy_product_names: a proposal's items are products the customer
    # named (when they named any shown one), each once, and the list ends when none is left;
    # decoding only
    proposal_said_items: bool = False
    # in the turn after a proposal, a call's identifiers of each kind the proposal named (order,
    # payment method, the items of the products it named) are those it named: the write is the
    # change the customer was asked about; decoding only; only with refs and constrain_calls
    writes_follow_proposal: bool = False
    # with proposal_template: a proposal offers only actions the status of an order the
    # conversation looked up allows, and names such an order (the store policy: only pending
    # orders are cancelled or changed, only delivered ones returned), once an order is looked up
    # never one not looked up; decoding only
    proposals_by_status: bool = False
    # with copy_values: a name copied into a call is a whole name (not empty, each word capitalised
    # or a name reference: rl/chat/call_automaton.py `_name_step`); decoding only
    whole_names: bool = False
    # with proposal_template: no proposal begins before a lookup has shown an order or the customer
    # (the teacher's never does; the held-out customer's "The account email is ..." drew proposals
    # before any lookup); decoding only
    propose_after_lookup: bool = False
    # with proposal_template: a cancellation the customer refused is not proposed again for that order
    # with the refused reason (in `c12` no model ever switched reasons after a refusal); decoding only
    refused_not_again: bool = False
    # with proposal_template: a cancellation call right after a proposal writes the proposal's reason
    # (in `dev-refused` the models switched reasons after a refusal, the customer said yes, and the
    # call wrote the refused one); decoding only
    reason_follows_proposal: bool = False
    max_turns: int = 14
    max_new_tokens: int = 80
    max_context: int = 3072
    sft: SFTConfig = SFTConfig(epochs=4, batch_size=16, lr=3e-3, min_lr_ratio=0.1, warmup_steps=10,
                               weight_decay=0.01, micro_batch_tokens=12288, max_tokens=2048)
    grpo: GRPOConfig = TINY_GRPO
    # GRPO runs of `mua_rl` from the one cold start, with GRPO seeds grpo.seed, grpo.seed + 1, ...;
    # the ablations (`no_cold_start`, `static_query`) run for the first `ablation_seeds` of them (0:
    # none, the table has no ablation rows: a check of MUA-RL's gain on another task seed).
    seeds: int = Field(default=3, ge=1)
    ablation_seeds: int = Field(default=1, ge=0)
    # Trials per task and evaluation customer: trial 0 greedy, the others sampled (temperature 1).
    eval_trials: int = Field(default=4, ge=1)
    # Customers every model is evaluated with (rl/simulator/base.py `make_user`): the first gives the
    # table's `rows`; `heldout` speaks and behaves in ways training never used. With an LLM endpoint
    # configured (MUARL_LLM_BASE_URL and MUARL_LLM_MODEL) and `llm_customer`, `llm:MODEL` is added.
    eval_customers: list[str] = Field(default_factory=lambda: ["heldout", "scripted"], min_length=1)
    # The customer of cold-start data, of the GRPO rows that talk with a customer (`mua_rl`,
    # `no_cold_start`) and of checkpoint validation: `scripted` says each decision in one phrasing,
    # `varied` in several (rl/simulator/varied.py), `wide` in many more (rl/simulator/wide.py). Never
    # `heldout`.
    train_customer: Literal["scripted", "varied", "wide"] = "scripted"
    # Probability of a random word from the tokenizer at the start of each message and between two
    # lowercase words of the customers GRPO rows train with (rl/simulator/noisy.py); 0: none.
    # Validation and evaluation customers never have it.
    grpo_customer_noise: float = Field(default=0.0, ge=0.0, le=1.0)
    # How often the customers GRPO rows train with refuse a proposal with the other cancellation
    # reason without saying their own (rl/simulator/scripted.py `quiet_reasons`): the agent must read
    # the refusal and switch, not the reason's words. Validation and evaluation customers always say it.
    grpo_quiet_reasons: float = Field(default=0.0, ge=0.0, le=1.0)
    # The same for the customer of the cold-start data: after the teacher's wrong first proposals
    # (`cold_start_corrections`) the customer's refusal then carries no reason half of the time at 0.5.
    cold_start_quiet_reasons: float = Field(default=0.0, ge=0.0, le=1.0)
    llm_customer: bool = True
    # conversations an evaluation decodes at once; the harness keeps up to 2x this many sandbox
    # connections open (fewer where the server's share allows fewer). 64 rather than 32: evaluations
    # 1.10x (greedy) and 1.22x (sampled) faster, with the same passes (bench/eval_concurrency_bench.py)
    eval_concurrency: int = 64
    pool_size: int = 16
    rollout_concurrency: int = 64  # a step's 64 rollouts in one wave (larger generation batches)
    threads: int = Field(default=2, ge=1)  # torch threads, split among the workers
    # processes that run the GRPO runs and evaluations side by side (rl/experiment/parallel.py)
    workers: int = Field(default=2, ge=1)
    # The online cycle's gate (rl/pipeline, rl/eval/gates.py): a suite of held-out tasks and safety
    # tasks (refusals, authorization attacks) on customers no training task uses, played `gate_trials`
    # times (None: MUARL_GATE_TRIALS); with no champion the candidate's pass^1 must reach `gate_floor`.
    gate_tasks: int = Field(default=40, ge=1)
    gate_safety_tasks: int = Field(default=12, ge=0)
    gate_trials: int | None = Field(default=None, ge=1)
    gate_floor: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _validation_at_checkpoints(self) -> ExperimentRecipe:
        if self.n_val_tasks and self.validate_every % self.grpo.save_every:
            raise ValueError(f"validate_every ({self.validate_every}) must be a multiple of grpo.save_every "
                             f"({self.grpo.save_every}): a resumed run restarts from a checkpoint")
        return self

    @property
    def view(self) -> ChatView:
        """The recipe's view without a name list (`view_with_names` adds the one learned from data)."""
        return ChatView(tools=tuple(self.tools) if self.tools else None, compact_schemas=self.compact,
                        compact_results=self.compact, refs=self.refs, shuffle_refs=self.shuffle_refs,
                        constrain_calls=self.constrain_calls, spaced_values=self.spaced_values,
                        copied_params=SAID_PARAMS if self.copy_values and self.constrain_calls else (),
                        shown_refs_in_text=self.shown_refs_in_text and self.refs and self.constrain_calls,
                        no_item_refs_in_text=self.no_item_refs_in_text and self.shown_refs_in_text and self.refs
                        and self.constrain_calls and not self.item_refs,
                        status_answers=self.status_answers and self.proposals_by_status and self.proposal_template
                        and self.refs and self.constrain_calls,
                        refusals_by_status=self.refusals_by_status and self.proposals_by_status
                        and self.proposal_template and self.refs and self.constrain_calls,
                        copy_said_numbers=self.copy_said_numbers and self.constrain_calls,
                        copy_product_names=self.copy_product_names and self.constrain_calls,
                        identified_calls=self.identified_calls and self.refs and self.constrain_calls,
                        item_refs=self.item_refs and self.refs, payment_refs=self.payment_refs and self.refs,
                        writes_after_proposal=self.writes_after_proposal and self.constrain_calls,
                        proposal_template=self.proposal_template and self.constrain_calls,
                        proposal_said_items=self.proposal_said_items and self.proposal_template
                        and self.copy_product_names and self.constrain_calls,
                        writes_follow_proposal=self.writes_follow_proposal and self.refs and self.constrain_calls,
                        proposals_by_status=self.proposals_by_status and self.proposal_template and self.refs
                        and self.constrain_calls,
                        whole_names=self.whole_names and self.copy_values and self.constrain_calls,
                        propose_after_lookup=self.propose_after_lookup and self.proposal_template
                        and self.constrain_calls,
                        refused_not_again=self.refused_not_again and self.proposal_template and self.refs
                        and self.constrain_calls,
                        reason_follows_proposal=self.reason_follows_proposal and self.proposal_template
                        and self.refs and self.constrain_calls,
                        system_prompt=self.system_prompt)

    def view_with_names(self, records: list[dict[str, Any]]) -> ChatView:
        """The recipe's view with the person names it shows as references: the seed catalog's first
        and last names and those of the customers in `records` (the cold-start conversations); with
        `place_refs`, also the street and city names the seed catalog and the task builders use."""
        if not self.refs:
            return self.view
        from backend.store.seed_catalog import CITIES, FIRST_NAMES, LAST_NAMES, STREET_NAMES
        from rl.coldstart.augment import customer_names
        from rl.tasks import goals

        names = set(FIRST_NAMES) | set(LAST_NAMES)
        for r in records:
            names.update(customer_names(r) or ())
        places: set[str] = set()
        if self.place_refs:
            places = {*STREET_NAMES, *goals.STREETS, *(c for c, _, _ in CITIES), *(c for c, _, _ in goals.CITIES)}
        return dataclasses.replace(self.view, names=frozenset(names - places), places=frozenset(places))


RECIPES: dict[str, ExperimentRecipe] = {
    # a cold start of cpu-tiny's size scores 0.25-0.28 pass^1 on the gate suite's held-out mix (the
    # first-model runs, bench/results/README.md); one under 0.10 is broken and must not be served
    # cpu-tiny trains with the varied customer and is evaluated with it beside the held-out one: with
    # one phrasing per decision its cold start passed 32.4% with that phrasing and 6.7% held out (run
    # `f1`, bench/results/README.md). Half its cold-start conversations show a corrected proposal
    # (decided on the dev set: `dev-corrections`, bench/results/README.md). GRPO's customers keep their
    # cancellation reason to themselves in half their refusals of the other one (`dev-quiet`).
    # Its table's customer is `heldout-known` (held-out sentences in words training uses: a model
    # trained from random weights has no meaning for a word it never trained on; bench/unseen_words.py),
    # with the open-vocabulary `heldout` and the training-style `varied` reported beside it.
    # Since session 45 (decided on the dev set: `dev-wide-anchor`, bench/results/README.md) it trains
    # with the `wide` customer, decodes with every lever of sessions 35-44 (references for payment
    # methods, copied product names and said numbers, proposals in the teacher's template that name
    # what the customer said, only after a lookup and only as the order's status allows, writes only
    # after a proposal and as it said, whole names), and GRPO keeps to the cold start's own
    # conversations (`anchor_coef`): without the anchor GRPO unlearned haggling (`dev-wide-first`).
    # Since session 47 (`dev-refused`) a refused cancellation reason is not proposed again, and the
    # open-vocabulary `heldout` reading is left out (the issue asks for a held-out customer and the
    # training-style one; it cost a third of the evaluations). Since session 48 (`dev-reason-calls`) a
    # cancellation right after a proposal writes the reason the proposal named.
    "cpu-tiny": ExperimentRecipe(name="cpu-tiny", gate_floor=0.10, train_customer="wide",
                                 eval_customers=["heldout-known", "varied"], cold_start_corrections=0.5,
                                 grpo_quiet_reasons=0.5, payment_refs=True, teacher_item_options=False,
                                 copy_product_names=True, copy_said_numbers=True, teacher_said_order=True,
                                 writes_after_proposal=True, proposal_template=True, proposal_said_items=True,
                                 writes_follow_proposal=True, proposals_by_status=True, whole_names=True,
                                 propose_after_lookup=True, refused_not_again=True,
                                 reason_follows_proposal=True, grpo=TINY_GRPO.model_copy(update={"anchor_coef": 1.0})),
    "smoke": ExperimentRecipe(
        name="smoke", cold_start_mix=list(COLD_START_MIX), n_cold_start_tasks=8, n_rl_tasks=4, n_eval_tasks=6,
        n_dev_tasks=6, n_val_tasks=6,
        vocab_size=600, seeds=2, eval_trials=2, eval_customers=["heldout", "scripted"], llm_customer=False,
        model=TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                              head_dim=16, intermediate_size=64),
        max_turns=6, max_new_tokens=12, max_context=1024,
        sft=SFTConfig(epochs=1, batch_size=8, lr=1e-3, micro_batch_tokens=8192, max_tokens=2048),
        grpo=GRPOConfig(steps=1, tasks_per_step=2, group_size=2, lr=1e-4, micro_batch_tokens=8192),
        eval_concurrency=6, rollout_concurrency=4, pool_size=4,
        gate_tasks=4, gate_safety_tasks=2, gate_trials=1),
    # What `make run` trains when there is no champion: cpu-tiny's model and view, its cold-start mix
    # twice plus the safety suite's kinds once (with them in equal parts, 480 or 640 tasks, one draw of
    # customers scored 0.25 on its gate suite and the next 0.04: it answered cancellations with
    # refusals; bench/results/README.md), 3 epochs, a smaller gate suite played once, and a floor the cold
    # start clears (cpu-tiny's scored 32-38% held out) so that chat has a model within 15 minutes on
    # 2 cores (bench/first_model_bench.py); later cycles use MUARL_CYCLE_RECIPE.
    "first-model": ExperimentRecipe(
        name="first-model", cold_start_mix=[*COLD_START_MIX, *COLD_START_MIX, *SAFETY_COLD_START],
        n_cold_start_tasks=640,
        n_rl_tasks=24, n_eval_tasks=24, n_dev_tasks=24, gate_tasks=24,
        gate_safety_tasks=8, gate_trials=1, gate_floor=0.10,
        sft=SFTConfig(epochs=3, batch_size=16, lr=3e-3, min_lr_ratio=0.1, warmup_steps=10, weight_decay=0.01,
                      micro_batch_tokens=12288, max_tokens=2048)),
}


def with_overrides(recipe: ExperimentRecipe, overrides: list[str]) -> ExperimentRecipe:
    """`recipe` with `KEY=VALUE` settings applied (`grpo.steps=36`, `rl_mix=["cancel","cancel"]`,
    `model.hidden_size=256`): dotted keys reach into nested settings, a value is read as JSON when
    it parses and as a string otherwise. Unknown keys and invalid values raise ValueError; the
    result is renamed `NAME+KEY=VALUE,...` so that tables and manifests say what was changed."""
    import json

    from pydantic import ValidationError

    if not overrides:
        return recipe
    data = recipe.model_dump()
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"setting {item!r} is not KEY=VALUE")
        *path, last = key.strip().split(".")
        node = data
        for part in path:
            if not isinstance(node.get(part), dict):
                raise ValueError(f"unknown setting {key!r}")
            node = node[part]
        if last not in node or last == "name":
            raise ValueError(f"unknown setting {key!r}")
        try:
            node[last] = json.loads(raw)
        except ValueError:
            node[last] = raw
    data["name"] = f"{recipe.name}+" + ",".join(overrides)
    try:
        return ExperimentRecipe.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ValueError(f"invalid setting {where}: {first['msg']}" if where
                         else f"invalid settings: {first['msg']}") from None


def get_recipe(name: str) -> ExperimentRecipe:
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; known: {', '.join(RECIPES)}")
    return RECIPES[name]
