"""The README's quick start: a support agent with one tool call and one LLM call.

Run it live (it records the trace into the local store), promote the trace to a case, and
replay it hermetically:

    python examples/quickstart.py 7
    tracely traces list
    tracely cases promote TRACE_ID --name "order 7" --entrypoint examples.quickstart:run
    tracely replay

``chat`` stands in for your model call so this runs with no API key; swap in a real client
and nothing else changes.
"""

from __future__ import annotations

import sys

import tracely_sdk as tracely

ORDERS = {7: {"status": "shipped", "carrier": "DHL"}, 8: {"status": "packing"}}


def get_order(order_id: int) -> dict[str, str]:
    """Your tool: here a table, in production an API or a database."""
    return ORDERS[order_id]


def chat(messages: list[dict[str, str]]) -> str:
    """Your model call: here a stand-in, in production an LLM."""
    return "Good news: " + messages[-1]["content"].split(": ", 1)[1]


def run(order_id: int) -> str:
    """The agent: every external call goes through tracely's seam."""
    with tracely.agent("support-agent", input=order_id) as agent_run:
        order = tracely.call_tool(
            "get_order", lambda: get_order(order_id), args={"order_id": order_id}
        )
        messages = [
            {"role": "system", "content": "You are a friendly support agent."},
            {
                "role": "user",
                "content": f"Tell the customer: order {order_id} is {order['status']}",
            },
        ]
        answer = tracely.call_llm("gpt-4o", lambda: chat(messages), input=messages, usage=(41, 9))
        agent_run.output = answer
        return answer


if __name__ == "__main__":
    tracely.init(service_name="support-agent")  # OTel pipeline + recording into .tracely/
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
