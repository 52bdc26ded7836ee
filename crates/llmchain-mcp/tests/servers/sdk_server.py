"""An MCP server written with the official Python SDK (`mcp` 2.x on PyPI), for the
llmchain-mcp client tests. Serves stdio by default, streamable HTTP with `--http PORT`.
"""
import asyncio
import base64
import sys

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import BaseModel

PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

server = MCPServer("llmchain-test-python")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True), title="Echo text")
def echo(text: str) -> str:
    """Echoes the text back."""
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def image() -> CallToolResult:
    """Returns a 1x1 PNG and a caption."""
    return CallToolResult(
        content=[TextContent(type="text", text="a pixel"), ImageContent(type="image", data=PNG_1X1, mimeType="image/png")]
    )


GZIP_EMPTY = base64.b64encode(bytes.fromhex("1f8b08000000000000030300000000000000000000")).decode()


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def resources() -> CallToolResult:
    """Returns every kind of content: two text blocks, a text resource, a blob resource,
    an image and a resource link (as server-everything's resource tools do)."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="Resource 3:"),
            TextContent(type="text", text="Resource 3: This is a text resource."),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="test://static/resource/3", mimeType="text/plain", text="plain body"),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///data/archive.gz", mimeType="application/gzip", blob=GZIP_EMPTY),
            ),
            ImageContent(type="image", data=PNG_1X1, mimeType="image/png"),
            ResourceLink(type="resource_link", uri="file:///data/people.csv", name="people"),
        ],
        structuredContent={"count": 6},
    )


class Weather(BaseModel):
    city: str
    temp_c: float


@server.tool()
def weather(city: str) -> Weather:
    """Structured weather for a city."""
    return Weather(city=city, temp_c=18.5)


@server.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=False))
def delete_thing(name: str) -> CallToolResult:
    """Pretends to delete something and fails."""
    return CallToolResult(content=[TextContent(type="text", text=f"cannot delete {name}: locked")], isError=True)


@server.tool()
def strict_params(count: int) -> str:
    """Raises a JSON-RPC invalid-params error for a negative count."""
    if count < 0:
        raise MCPError(code=INVALID_PARAMS, message="count must be >= 0")
    return f"count={count}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def huge(megabytes: int) -> str:
    """Returns that many megabytes of text."""
    return "x" * (megabytes * 1024 * 1024)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
