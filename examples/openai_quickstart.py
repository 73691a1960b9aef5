"""The README's OpenAI example: an unchanged SDK call, recorded and replayed.

    python -m examples.llm_server --port 8765 &        # a local stand-in for the OpenAI API
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=test-key \\
        python examples/openai_quickstart.py "What is OpenTelemetry?"

Against the real API, set OPENAI_API_KEY and nothing else.
"""

import sys

import openai

import tracely_sdk as tracely

client = openai.OpenAI()  # as before: reads OPENAI_API_KEY (and OPENAI_BASE_URL)


def run(question: str) -> str:
    with tracely.agent("support-agent", input=question) as agent_run:  # the case's root
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
        )
        agent_run.output = reply.choices[0].message.content
        return agent_run.output


if __name__ == "__main__":
    tracely.init(instrument="auto")  # trace, record, and patch the installed provider SDKs
    print(run(sys.argv[1] if len(sys.argv) > 1 else "Hello"))
