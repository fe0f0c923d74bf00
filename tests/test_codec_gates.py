"""Capability gates: a method the receiving side did not advertise is refused with -32601."""

import msgspec
import pytest

from mcpbind import Codec, ProtocolError, Request
from mcpbind import v2024_11_05 as v1
from mcpbind import v2025_11_25 as v4

CALL_TOOL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}'


def sampling(**params):
    body = {"messages": [], "maxTokens": 10, **params}
    return msgspec.json.encode(
        {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": body}
    )


def refused(call, capability):
    with pytest.raises(ProtocolError) as info:
        call()
    assert info.value.code == -32601
    assert info.value.data["capability"] == capability
    assert capability in info.value.message
    return info.value


def test_nothing_is_checked_until_the_codec_knows_what_was_advertised():
    assert isinstance(Codec("2025-11-25", "server").decode(CALL_TOOL), v4.CallToolRequest)


def test_a_server_refuses_a_tool_call_when_it_did_not_advertise_tools():
    server = Codec("2025-11-25", "server", capabilities=v4.ServerCapabilities())
    error = refused(lambda: server.decode(CALL_TOOL), "tools")
    assert error.id == 1
    ok = Codec(
        "2025-11-25",
        "server",
        capabilities=v4.ServerCapabilities(tools=v4.ServerCapabilitiesTools()),
    )
    assert isinstance(ok.decode(CALL_TOOL), v4.CallToolRequest)


def test_the_codec_learns_both_sides_from_the_initialize_exchange():
    client = Codec("2025-11-25", "client")
    init = v4.InitializeRequest(
        id=0,
        jsonrpc="2.0",
        params=v4.InitializeRequestParams(
            capabilities=v4.ClientCapabilities(sampling=v4.ClientCapabilitiesSampling()),
            client_info=v4.Implementation(name="c", version="1"),
            protocol_version="2025-11-25",
        ),
    )
    client.encode(init)
    assert client.capabilities == init.params.capabilities
    client.decode(
        b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"prompts":{}},'
        b'"serverInfo":{"name":"s","version":"1"}}}'
    )
    assert client.peer_capabilities == v4.ServerCapabilities(prompts=v4.ServerCapabilitiesPrompts())
    # The server advertised prompts, not tools: the client will not send a tool call.
    call = msgspec.json.decode(CALL_TOOL, type=v4.CallToolRequest)
    refused(lambda: client.encode(call), "tools")
    # The client advertised plain sampling: sampling with tools needs sampling.tools.
    assert isinstance(client.decode(sampling()), v4.CreateMessageRequest)
    refused(lambda: client.decode(sampling(tools=[])), "sampling.tools")
    refused(lambda: client.decode(sampling(includeContext="allServers")), "sampling.context")
    assert isinstance(client.decode(sampling(includeContext="none")), v4.CreateMessageRequest)


def test_a_server_learns_its_own_capabilities_from_the_initialize_result_it_sends():
    server = Codec("2025-11-25", "server")
    result = v4.InitializeResult(
        capabilities=v4.ServerCapabilities(tools=v4.ServerCapabilitiesTools()),
        protocol_version="2025-11-25",
        server_info=v4.Implementation(name="s", version="1"),
    )
    server.respond(0, result)
    assert isinstance(server.decode(CALL_TOOL), v4.CallToolRequest)
    prompts = b'{"jsonrpc":"2.0","id":2,"method":"prompts/list"}'
    refused(lambda: server.decode(prompts), "prompts")


def test_url_elicitation_needs_url_mode_and_a_bare_elicitation_means_form_only():
    server = Codec("2025-11-25", "server", peer_capabilities={"elicitation": {}})
    form = v4.ElicitRequest(
        id=3,
        jsonrpc="2.0",
        params=v4.ElicitRequestFormParams(
            message="name?",
            requested_schema=v4.ElicitRequestFormParamsRequestedSchema(
                properties={}, type="object"
            ),
        ),
    )
    assert server.encode(form)
    url = v4.ElicitRequest(
        id=4,
        jsonrpc="2.0",
        params=v4.ElicitRequestURLParams(
            elicitation_id="e", message="go", mode="url", url="https://example.com"
        ),
    )
    refused(lambda: server.encode(url), "elicitation.url")
    assert Codec("2025-11-25", "server", peer_capabilities={"elicitation": {"url": {}}}).encode(url)


def test_task_methods_need_the_receivers_task_capability():
    client = Codec("2025-11-25", "client", capabilities={"tasks": {"cancel": {}}})
    listing = b'{"jsonrpc":"2.0","id":5,"method":"tasks/list"}'
    refused(lambda: client.decode(listing), "tasks.list")
    cancel = b'{"jsonrpc":"2.0","id":6,"method":"tasks/cancel","params":{"taskId":"t"}}'
    assert isinstance(client.decode(cancel), v4.CancelTaskRequest)
    server = Codec("2025-11-25", "server", capabilities={"tools": {}})
    augmented = b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","task":{}}}'
    refused(lambda: server.decode(augmented), "tasks.requests.tools.call")


def test_gates_apply_to_revisions_whose_requests_need_an_envelope():
    client = Codec("2024-11-05", "client", peer_capabilities={"prompts": {}})
    call = Request(id=1, message=v1.CallToolRequest(params=v1.CallToolRequestParams(name="echo")))
    refused(lambda: client.encode(call), "tools")
    server = Codec("2024-11-05", "server", capabilities={"tools": {}})
    assert isinstance(server.decode(CALL_TOOL), Request)


def test_assigning_new_capabilities_replaces_what_the_gates_found():
    """Verdicts are worked out once per capabilities object; a new object is read afresh."""
    server = Codec(
        "2025-11-25",
        "server",
        capabilities=v4.ServerCapabilities(tools=v4.ServerCapabilitiesTools()),
    )
    assert isinstance(server.decode(CALL_TOOL), v4.CallToolRequest)
    server.capabilities = v4.ServerCapabilities(prompts=v4.ServerCapabilitiesPrompts())
    refused(lambda: server.decode(CALL_TOOL), "tools")
    server.capabilities = {"tools": {}}
    assert isinstance(server.decode(CALL_TOOL), v4.CallToolRequest)


def test_a_conditional_gate_looks_into_the_params():
    """``tasks.requests.tools.call`` is needed only by a tools/call that carries ``task``."""
    server = Codec("2025-11-25", "server", capabilities={"tools": {}})
    assert isinstance(server.decode(CALL_TOOL), v4.CallToolRequest)
    with_task = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","task":{}}}'
    refused(lambda: server.decode(with_task), "tasks.requests.tools.call")


def test_a_method_found_advertised_is_checked_again_when_capabilities_change():
    """Once every gate of a method holds, the codec stops looking, in each direction, until a
    side's capabilities object is replaced."""
    get = b'{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p"}}'
    server = Codec("2025-11-25", "server", capabilities={"prompts": {}})
    for _ in range(2):  # the second decode is the one that skips the check
        assert isinstance(server.decode(get), v4.GetPromptRequest)
    server.capabilities = {"tools": {}}
    refused(lambda: server.decode(get), "prompts")

    client = Codec("2025-11-25", "client", peer_capabilities={"prompts": {}})
    request = v4.GetPromptRequest(id=4, jsonrpc="2.0", params=v4.GetPromptRequestParams(name="p"))
    for i in range(2):
        client.encode(msgspec.structs.replace(request, id=10 + i))
    client.peer_capabilities = {"tools": {}}
    refused(lambda: client.encode(msgspec.structs.replace(request, id=20)), "prompts")


def test_methods_with_the_same_gates_are_let_through_together_and_checked_again_together():
    """A method found advertised lets through, until a capabilities object changes, the methods
    whose gates are the same (prompts/list and prompts/get both need the server's prompts),
    and no other; a change makes each of them refused again where it no longer holds."""
    get = b'{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p"}}'
    listing = b'{"jsonrpc":"2.0","id":4,"method":"prompts/list"}'
    server = Codec("2024-11-05", "server", capabilities={"prompts": {}})
    assert isinstance(server.decode(listing).message, v1.ListPromptsRequest)
    assert {"prompts/list", "prompts/get"} <= server._gates.passed[True]
    assert "tools/call" not in server._gates.passed[True]
    assert isinstance(server.decode(get).message, v1.GetPromptRequest)
    refused(lambda: server.decode(CALL_TOOL), "tools")
    server.capabilities = {"tools": {}}
    refused(lambda: server.decode(get), "prompts")
    refused(lambda: server.decode(listing), "prompts")
    assert isinstance(server.decode(CALL_TOOL).message, v1.CallToolRequest)


def test_a_method_passed_while_a_side_was_unknown_is_checked_once_that_side_is_known():
    """A gate on a side whose capabilities are not known yet lets the message through, and the
    codec stops looking; learning that side's capabilities must make it look again."""
    sample = v4.CreateMessageRequest(
        id=5,
        jsonrpc="2.0",
        params=v4.CreateMessageRequestParams(messages=[], max_tokens=10),
    )
    server = Codec("2025-11-25", "server", capabilities={"tools": {}})  # the client's: unknown
    for i in range(2):
        server.encode(msgspec.structs.replace(sample, id=30 + i))
    server.peer_capabilities = {"roots": {}}
    refused(lambda: server.encode(msgspec.structs.replace(sample, id=40)), "sampling")


def test_a_method_settled_but_for_its_conditional_gates_still_looks_at_each_messages_params():
    """A server without task support settles tools/call once: after that only ``task`` in each
    message's params is looked for, and every one that carries it is still refused. The same
    for a gate that names a value (``includeContext``) and in the sending direction."""
    server = Codec("2025-11-25", "server", capabilities={"tools": {}})
    with_task = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","task":{}}}'
    for _ in range(3):
        assert isinstance(server.decode(CALL_TOOL), v4.CallToolRequest)
        refused(lambda: server.decode(with_task), "tasks.requests.tools.call")
    server.capabilities = {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}
    assert isinstance(server.decode(with_task), v4.CallToolRequest)

    client = Codec("2025-11-25", "client", capabilities={"sampling": {}})
    for context in ("none", "thisServer", "none", "allServers"):
        message = sampling(includeContext=context)
        if context == "none":
            assert isinstance(client.decode(message), v4.CreateMessageRequest)
        else:
            refused(lambda m=message: client.decode(m), "sampling.context")

    sender = Codec("2025-11-25", "client", peer_capabilities={"tools": {}})
    params = v4.CallToolRequestParams(name="echo")
    tasked = v4.CallToolRequestParams(name="echo", task=v4.TaskMetadata())
    for i in range(3):
        sender.encode(v4.CallToolRequest(id=50 + 2 * i, jsonrpc="2.0", params=params))
        message = v4.CallToolRequest(id=51 + 2 * i, jsonrpc="2.0", params=tasked)
        refused(lambda m=message: sender.encode(m), "tasks.requests.tools.call")
