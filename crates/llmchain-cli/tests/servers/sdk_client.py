"""The official MCP Python SDK's client (`mcp` on PyPI) against `llmchain mcp serve`:
tools/list, tools/call with good and bad arguments, an unknown tool, and ping. Prints
one JSON object with what it saw.

    python sdk_client.py LLMCHAIN_BINARY ROOT
"""
import asyncio
import json
import sys

from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=["mcp", "serve", "--root", sys.argv[2]])
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            tools = await session.list_tools()
            out["tools"] = {t.name: t.annotations.model_dump(exclude_none=True) for t in tools.tools}
            good = await session.call_tool("calculator", {"expression": "6*7"})
            out["good"] = {"is_error": good.is_error, "text": good.content[0].text}
            bad = await session.call_tool("calculator", {"expression": 42})
            out["bad_arguments"] = {"is_error": bad.is_error, "text": bad.content[0].text}
            try:
                await session.call_tool("no_such_tool", {})
                out["unknown"] = "no error"
            except MCPError as e:
                out["unknown"] = {"code": e.error.code, "message": e.error.message}
            await session.send_ping()
            out["ping"] = "ok"
    print(json.dumps(out))


asyncio.run(main())
