"""usage: python server.py PORT PACE_MS DELTAS

The pydantic-ai peer of the serve benchmark: POST /api/chat answers the AI SDK
UI message stream (VercelAIAdapter, sdk_version=6) of an agent over a scripted
FunctionModel. Step 1 streams DELTAS text deltas then calls the `weather` tool;
step 2 (after the tool result) streams DELTAS text deltas and stops. Each text
delta is "<CLOCK_MONOTONIC ns> ", taken when the model emits it.
"""

import asyncio
import sys
import time
from collections.abc import AsyncIterator

import uvicorn
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

try:
    PORT, PACE_MS, DELTAS = (int(a) for a in sys.argv[1:4])
    assert len(sys.argv) == 4 and PACE_MS >= 0 and DELTAS >= 0
except (ValueError, AssertionError):
    sys.exit('usage: python server.py PORT PACE_MS DELTAS')
PACE_S = PACE_MS / 1000


async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    for _ in range(DELTAS):
        if PACE_S:
            await asyncio.sleep(PACE_S)
        yield f'{time.monotonic_ns()} '
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        return
    yield {0: DeltaToolCall(name='weather', json_args='{"city": "Tokyo"}', tool_call_id='call-1')}


agent = Agent(FunctionModel(stream_function=stream_fn))


@agent.tool_plain
def weather(city: str) -> dict:
    return {'city': city, 'weather': 'sunny'}


async def chat(request: Request) -> Response:
    return await VercelAIAdapter.dispatch_request(request, agent=agent, sdk_version=6)


app = Starlette(routes=[Route('/api/chat', chat, methods=['POST'])])


async def main() -> None:
    config = uvicorn.Config(app, host='127.0.0.1', port=PORT, log_level='warning', access_log=False)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # raises if startup failed (e.g. port in use)
            sys.exit(1)
        await asyncio.sleep(0.01)
    print(f'listening http://127.0.0.1:{PORT}', flush=True)
    await serving


if __name__ == '__main__':
    asyncio.run(main())
