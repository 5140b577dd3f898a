"""The tiny recipe's chat view: a subset of compact tool schemas and compact tool results."""

import dataclasses
import json
import re

from rl.chat.views import FULL_VIEW, ChatView, compact_result

ORDER = {"order_id": "#W1", "user_id": "u1", "address": {"city": "Austin"}, "status": "pending",
         "items": [{"name": "Lamp", "product_id": "p1", "item_id": "111", "price": 9.5, "options": {"color": "red"}}],
         "fulfillments": [], "payment_history": [{"transaction_type": "payment", "amount": 9.5,
                                                  "payment_method_id": "paypal_1"},
                                                 {"transaction_type": "refund", "amount": 9.5,
                                                  "payment_method_id": "gift_card_2"}]}
TOOLS = [{"type": "function", "function": {"name": n, "description": "long words " * 20, "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"},
                                     "item_ids": {"type": "array", "items": {"type": "string"}}}}}}
         for n in ("get_order_details", "calculate")]


def test_compact_order_keeps_what_an_agent_acts_on():
    out = json.loads(compact_result(json.dumps(ORDER)))
    assert out == {"order_id": "#W1", "status": "pending", "items": [{"item_id": "111", "name": "Lamp"}],
                   "paid_with": ["paypal_1"]}
    assert compact_result("Error: order not found") == "Error: order not found"
    shipped = {**ORDER, "fulfillments": [{"tracking_id": [123456789012], "item_ids": ["111"]}]}
    assert json.loads(compact_result(json.dumps(shipped)))["tracking"] == ["123456789012"]
    user = {"name": {"first_name": "A", "last_name": "B"}, "email": "a@b", "payment_methods": {"paypal_1": {}},
            "orders": ["#W1"], "address": {}}
    assert json.loads(compact_result(json.dumps(user))) == {"name": "A B", "payment_methods": ["paypal_1"],
                                                            "orders": ["#W1"]}


def test_view_filters_tools_and_rewrites_only_tool_messages():
    view = ChatView(tools=("get_order_details",), compact_schemas=True, compact_results=True)
    assert view.tool_list(TOOLS) == [{"name": "get_order_details",
                                      "parameters": {"order_id": "string", "item_ids": "array[string]"}}]
    msgs = [{"role": "user", "content": json.dumps(ORDER)}, {"role": "tool", "content": json.dumps(ORDER)}]
    shown = view.messages(msgs)
    assert shown[0] == msgs[0] and len(shown[1]["content"]) < len(msgs[1]["content"]) / 2
    assert FULL_VIEW.tool_list(TOOLS) == TOOLS and FULL_VIEW.messages(msgs) == msgs


def test_typed_references_are_numbered_per_kind_in_order_of_appearance():
    view = ChatView(refs=True, names=frozenset({"James", "Lee"}))
    refs = view.conversation()
    shown = refs.show("I am James Lee, zip 95161, email james.lee5010@example.com. Cancel #W8520591, James. "
                      "Or #W1111111. Mr Smith")
    assert shown == ("I am <name_1> <name_2>, zip <zip_1>, email <email_1>. Cancel <order_1>, <name_1>. "
                     "Or <order_2>. Mr Smith")  # Smith is not one of the view's names
    result = refs.show('{"order_id":"#W8520591","user_id":"james_lee_5010","items":[{"item_id":"9494281769",'
                       '"name":"Lamp"}],"paid_with":["paypal_2684483"],"tracking":["582631475817"]}')
    assert result == ('{"order_id":"<order_1>","user_id":"<user_1>","items":[{"item_id":"<num_1>","name":"Lamp"}],'
                      '"paid_with":["<payment_1>"],"tracking":["<num_2>"]}')
    assert refs.expand('{"order_id": "<order_2>", "zip": "<zip_1>", "first_name": "<name_1>", "x": "<order_9>"}') == \
        '{"order_id": "#W1111111", "zip": "95161", "first_name": "James", "x": "<order_9>"}'
    assert "<email_1>" in view.extra_tokens and ChatView().extra_tokens == () and ChatView().conversation() is None


def test_a_kind_that_runs_out_of_references_shows_values_as_they_are():
    refs = ChatView(refs=True).conversation()
    emails = [f"a{i}@x.com" for i in range(6)]
    shown = refs.show(" ".join(emails))
    assert shown.split()[:4] == ["<email_1>", "<email_2>", "<email_3>", "<email_4>"]
    assert shown.split()[4:] == emails[4:]


def test_recorded_conversation_gets_references_in_text_tool_calls_and_results():
    view = ChatView(compact_results=True, refs=True)
    msgs = [{"role": "system", "content": "Store 1234 rules"},
            {"role": "user", "content": "Cancel #W1111111 please"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {
                "name": "get_order_details", "arguments": json.dumps({"order_id": "#W1111111"})}}]},
            {"role": "tool", "tool_call_id": "c", "content": json.dumps({**ORDER, "order_id": "#W1111111"})}]
    shown = view.messages(msgs)
    assert shown[0] == msgs[0] and shown[1]["content"] == "Cancel <order_1> please"
    assert json.loads(shown[2]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "<order_1>"}
    assert json.loads(shown[3]["content"])["order_id"] == "<order_1>"
    assert msgs[1]["content"] == "Cancel #W1111111 please"  # the record is not changed


def test_a_view_round_trips_through_a_manifest():
    view = ChatView(tools=("get_order_details",), compact_schemas=True, compact_results=True, refs=True,
                    names=frozenset({"Ann"}), constrain_calls=True, identified_calls=True)
    assert ChatView.from_manifest(json.loads(json.dumps(view.describe()))) == view
    assert ChatView.from_manifest(None) == FULL_VIEW


def test_shuffled_references_are_random_per_conversation_and_stable_per_key():
    view = ChatView(refs=True, shuffle_refs=True)
    text = "Cancel #W1111111 and #W2222222, email a@x.com"

    def numbers(key):
        shown = view.conversation(key).show(text)
        return shown, [int(n) for n in re.findall(r"<order_(\d+)>", shown)]

    shown, nums = numbers("episode-1")
    assert numbers("episode-1")[0] == shown  # the same conversation key gives the same numbers
    assert len(set(nums)) == 2 and all(1 <= n <= 24 for n in nums)
    assert len({tuple(numbers(f"e{i}")[1]) for i in range(20)}) > 10  # numbers differ across conversations
    refs = view.conversation("episode-1")
    refs.show(text)
    assert refs.expand(f"<order_{nums[1]}> <order_{nums[0]}>") == "#W2222222 #W1111111"
    assert ChatView(refs=True).conversation("anything").show(text).startswith("Cancel <order_1> and <order_2>")


def test_view_settings_survive_the_manifest():
    view = ChatView(tools=("a",), compact_schemas=True, compact_results=True, refs=True,
                    names=frozenset({"Ann"}), shuffle_refs=True, constrain_calls=True)
    assert ChatView.from_manifest(view.describe()) == view
    old = {k: v for k, v in view.describe().items() if k not in ("shuffle_refs", "constrain_calls")}
    assert ChatView.from_manifest(old) == dataclasses.replace(view, shuffle_refs=False, constrain_calls=False)
    assert view.ref_params["order_id"] == "order" and ChatView().ref_params == {}


def test_spaced_values_give_a_free_text_argument_the_tokens_of_the_customers_words():
    view = ChatView(refs=True, spaced_values=True)
    call = {"id": "c", "type": "function", "function": {"name": "cancel_pending_order", "arguments": json.dumps(
        {"order_id": "#W1111111", "reason": "no longer needed"})}}
    msgs = [{"role": "user", "content": "Cancel #W1111111, I no longer need it"},
            {"role": "assistant", "content": "", "tool_calls": [call]}]
    shown = json.loads(view.messages(msgs)[1]["tool_calls"][0]["function"]["arguments"])
    assert shown == {"order_id": "<order_1>", "reason": " no longer needed"}  # the reference is not spaced
    written = {**call, "function": {**call["function"], "arguments": json.dumps(shown)}}
    assert json.loads(view.read_call(written)["function"]["arguments"]) == {"order_id": "<order_1>",
                                                                           "reason": "no longer needed"}
    assert view.read_call({"function": {"name": "x", "arguments": "not json"}})["function"]["arguments"] == "not json"
    plain = ChatView(refs=True)
    assert plain.show_call(call) == call and plain.read_call(written) == written
    assert ChatView.from_manifest(view.describe()) == view
    assert ChatView.from_manifest({k: v for k, v in view.describe().items() if k != "spaced_values"}) == plain


def test_with_spaced_values_a_quoted_argument_starts_with_the_words_customer_token():
    from rl.chat.format import render_conversation
    from rl.models.tokenizer import train_bpe

    said = "I no longer need it."
    msgs = [{"role": "user", "content": said}, {"role": "assistant", "content": "", "tool_calls": [{"function": {
        "name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "no longer needed"}}}]}]
    texts = [render_conversation(ChatView(spaced_values=s).messages(msgs)) for s in (True, False)] * 30
    tok = train_bpe(texts, vocab_size=300)
    word = tok.convert_ids_to_tokens(tok.encode(said, add_special_tokens=False))[1]  # "Ġno"
    spaced, plain = (tok.convert_ids_to_tokens(tok.encode(t, add_special_tokens=False)) for t in texts[:2])
    assert word == "Ġno" and spaced.count(word) == 2  # the customer's word and the call's: one token
    assert plain.count(word) == 1  # unspaced, the call's "no" (after a quote) is another token


def test_a_record_is_shown_with_the_views_messages_and_tools():
    view = ChatView(tools=("cancel_pending_order",), compact_results=True, spaced_values=True)
    call = {"id": "c1", "type": "function",
            "function": {"name": "cancel_pending_order",
                         "arguments": '{"order_id": "#W1", "reason": "no longer needed"}'}}
    record = {"messages": [{"role": "assistant", "content": "", "tool_calls": [call]}],
              "tools": [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                        for n in ("cancel_pending_order", "get_user_details")]}
    shown = view.record(record)
    assert shown == {"messages": view.messages(record["messages"]), "tools": view.tool_list(record["tools"])}
    assert [t["function"]["name"] for t in shown["tools"]] == ["cancel_pending_order"]
    assert '" no longer needed"' in shown["messages"][0]["tool_calls"][0]["function"]["arguments"]


def test_a_view_shows_its_model_its_own_system_message():
    view = ChatView(system_prompt="Be brief.")
    msgs = [{"role": "system", "content": "the store policy"}, {"role": "user", "content": "hi"}]
    assert view.messages(msgs) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert FULL_VIEW.messages(msgs) == msgs and FULL_VIEW.system("the store policy") == "the store policy"
    assert ChatView.from_manifest(json.loads(json.dumps(view.describe()))) == view


def test_known_places_are_references_longest_first_and_only_with_a_place_list():
    places = frozenset({"Salt Lake City", "Hillcrest Road", "Austin"})
    view = ChatView(refs=True, names=frozenset({"James"}), places=places)
    refs = view.conversation()
    said = "James here: ship it to 4107 Hillcrest Road, Suite 551, Salt Lake City, UT 84101. Not Austin Lane? Hillcrest"
    shown = refs.show(said)
    assert shown == ("<name_1> here: ship it to <num_1> <place_1>, Suite 551, <place_2>, UT <zip_1>. "
                     "Not <place_3> Lane? Hillcrest")  # only a whole known place is one
    assert refs.expand(shown) == said
    assert refs.expand("<num_1> <place_2>") == "4107 Salt Lake City"
    assert set(view.extra_tokens) - set(ChatView(refs=True).extra_tokens) == {f"<place_{i}>" for i in range(1, 9)}
    assert "Hillcrest Road" in ChatView(refs=True).conversation().show("Hillcrest Road")  # no list: as it is
    assert ChatView.from_manifest(json.loads(json.dumps(view.describe()))) == view
    old = {k: v for k, v in view.describe().items() if k != "places"}  # a manifest from before places
    assert ChatView.from_manifest(old) == dataclasses.replace(view, places=frozenset())


def test_with_item_refs_free_text_names_a_looked_up_item_by_its_reference():
    view = ChatView(compact_schemas=True, compact_results=True, refs=True, item_refs=True)
    refs = view.conversation()
    order = {"order_id": "#W1234567", "status": "delivered", "payment_history": [],
             "items": [{"item_id": "1111111111", "name": "Electric Kettle", "options": {"color": "white"}},
                       {"item_id": "2222222222", "name": "Dumbbell Set", "options": {"weight": "30 lbs"}}]}
    product = {"name": "Electric Kettle", "product_id": "9999999999",
               "variants": {"3333333333": {"available": True, "options": {"color": "black"}}}}
    shown_order = refs.show(view.result(json.dumps(order)))
    assert shown_order.count("<num_") == 2 and "Electric Kettle" in shown_order  # a lookup still names them
    refs.show(view.result(json.dumps(product)))
    text = ("To confirm, I will return the Dumbbell Set (item 2222222222) from order #W1234567, then "
            "exchange the Electric Kettle (item 1111111111) for the Electric Kettle (item 3333333333).")
    shown = refs.show(text)
    kettle, dumbbells = (refs.index[i] for i in ("1111111111", "2222222222"))
    assert shown == (f"To confirm, I will return the {dumbbells} from order <order_1>, then exchange the "
                     f"{kettle} for the {refs.index['3333333333']}.")
    assert refs.expand(shown) == text
    # in a call the same reference is the bare id; a reference that is no item stays its value
    wrote = (f"Return the {kettle}? <tool_call>\n"
             f'{{"name": "return_delivered_order_items", "arguments": {{"item_ids": ["{kettle}"]}}}}\n</tool_call>')
    assert refs.expand(wrote) == ('Return the Electric Kettle (item 1111111111)? <tool_call>\n'
                                  '{"name": "return_delivered_order_items", "arguments": {"item_ids": ["1111111111"]}}'
                                  '\n</tool_call>')
    assert refs.expand(f"<tool_call>{kettle}") == "<tool_call>1111111111"  # a call not closed yet
    assert refs.expand(f"{refs.index['9999999999']} of <order_1>") == "9999999999 of #W1234567"
    # without item_refs the same text keeps its product names and expands ids bare
    plain = ChatView(compact_results=True, refs=True).conversation()
    plain.show(view.result(json.dumps(order)))
    assert "Dumbbell Set (item <num_" in plain.show(text)
    assert ChatView.from_manifest(json.loads(json.dumps(view.describe()))) == view
    assert ChatView.from_manifest({k: v for k, v in view.describe().items() if k != "item_refs"}).item_refs is False


def test_with_payment_refs_a_user_record_describes_its_methods_and_free_text_names_one_by_reference():
    view = ChatView(compact_schemas=True, compact_results=True, refs=True, payment_refs=True)
    refs = view.conversation()
    user = {"name": {"first_name": "Ann", "last_name": "Lee"}, "orders": ["#W1234567"], "address": {},
            "payment_methods": {"paypal_7732922": {"source": "paypal", "id": "paypal_7732922"},
                                "credit_card_4421486": {"source": "credit_card", "brand": "visa", "last_four": "1234",
                                                        "id": "credit_card_4421486"},
                                "gift_card_5550001": {"source": "gift_card", "balance": 20, "id": "gift_card_5550001"}}}
    compact = view.result(json.dumps(user))
    assert json.loads(compact)["payment_methods"] == {"credit_card_4421486": "Visa card ending in 1234",
                                                      "gift_card_5550001": "gift card",
                                                      "paypal_7732922": "PayPal account"}
    shown_user = refs.show(compact)
    card, paypal, gift = (refs.index[i] for i in ("credit_card_4421486", "paypal_7732922", "gift_card_5550001"))
    assert f'"{card}":"Visa card ending in <num_' in shown_user and f'"{paypal}":"PayPal account"' in shown_user
    # the teacher's mention of each method is its reference alone, and the model's reference reads back as it
    text = ("To confirm, I will return the Lamp from order #W1234567, with the refund going to your Visa card "
            "ending in 1234 (credit_card_4421486). Or your PayPal account (paypal_7732922), or your gift card "
            "(gift_card_5550001)?")
    shown = refs.show(text)
    assert shown == (f"To confirm, I will return the Lamp from order <order_1>, with the refund going to your {card}. "
                     f"Or your {paypal}, or your {gift}?")
    assert refs.expand(shown) == text
    # in a call the reference is the bare id
    call = f'<tool_call>\n{{"name": "x", "arguments": {{"payment_method_id": "{card}"}}}}\n</tool_call>'
    assert refs.expand(call) == call.replace(card, "credit_card_4421486")
    # without the setting: ids alone in the record, and the mention keeps its words
    plain_view = ChatView(compact_results=True, refs=True)
    plain = plain_view.conversation()
    assert json.loads(plain_view.result(json.dumps(user)))["payment_methods"] == sorted(user["payment_methods"])
    plain.show(plain_view.result(json.dumps(user)))
    assert "your Visa card ending in <num_" in plain.show(text)
    assert ChatView.from_manifest(json.loads(json.dumps(view.describe()))) == view
    older = {k: v for k, v in view.describe().items() if k != "payment_refs"}
    assert ChatView.from_manifest(older).payment_refs is False
