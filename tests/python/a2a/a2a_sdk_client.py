"""Drives a served Murmur capsule with the official A2A Python SDK (a2a-sdk 1.x).

    a2a_sdk_client.py URL {hitl|cancel} [PROTOCOL [TOKEN]]
    a2a_sdk_client.py URL {basic|unauthenticated} [TOKEN]

URL is the door's base URL (`http://127.0.0.1:PORT`). With TOKEN, every request (the card
fetch too) carries `Authorization: Bearer TOKEN`. In `hitl` and `cancel`, PROTOCOL is the A2A
version the card is asked for (`A2A-Version` header): `1.0` (the default) or `0.3`; the SDK's
client factory then picks its transport from that card (JSON-RPC 1.0, or its v0.3 compat
transport). `basic` and `unauthenticated` read the card the way the SDK does by default, with
no `A2A-Version` header, so the door answers with its discovery card (both versions' fields)
and the factory picks from that. SCENARIO is one of:

- `hitl`: stream a message; the task must stop at `input-required` with a prompt; reply on the
  same task (its taskId and contextId), streamed too; the task must end `completed` with an
  answer.
- `cancel`: stream a message whose task keeps working; cancel it through the SDK while the
  stream is open; the task must be `canceled` (in the cancel answer, at the end of the stream,
  and in a later get-task).
- `basic`: send a message without streaming (the task must be `completed`); stream a message
  (it must end `completed`); get the first task (`completed`); then stream a message whose
  task keeps working and cancel it, as in `cancel`.
- `unauthenticated`: read the card (it is public); send a message, without and with
  streaming: the SDK must raise its HTTP error, for a 401 each time.

Every observed event or state is printed as one JSON line on stdout (`{"event": ...}`), so the
Rust test (tests/a2a_python.rs) can assert on them. Anything unexpected prints an `error` line
and a message on stderr, and exits 1. Only the SDK's own client classes talk to the door: the
card resolver, the client factory, and the client's send_message / get_task / cancel_task.
"""

import asyncio
import importlib.metadata
import json
import pathlib
import sys


def check_environment() -> None:
    """The installed a2a-sdk must be the one tests/python/a2a/requirements.txt pins."""
    requirements = pathlib.Path(__file__).with_name('requirements.txt')
    pin = next(
        line.split('==', 1)[1].strip()
        for line in requirements.read_text().splitlines()
        if line.startswith('a2a-sdk==')
    )
    try:
        installed = importlib.metadata.version('a2a-sdk')
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != pin:
        sys.exit(
            f'a2a_sdk_client: a2a-sdk {installed or "is not installed"} in {sys.prefix}, '
            f'but {requirements} pins {pin}: run scripts/python-env'
        )


check_environment()

import httpx  # noqa: E402 - after the environment check, which names the fix


from a2a.client import A2ACardResolver, ClientConfig, ClientFactory  # noqa: E402
from a2a.client.errors import A2AClientError  # noqa: E402
from a2a.helpers import get_message_text, get_text_parts, new_text_message  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf.json_format import MessageToDict  # noqa: E402

# The whole scenario's limit: a hung stream fails the test instead of hanging it.
DEADLINE_SECS = 90


class Unexpected(Exception):
    """Something the scenario did not expect."""


def emit(event: str, **fields) -> None:
    print(json.dumps({'event': event, **fields}), flush=True)


def state_name(state: int) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required` (the A2A state names)."""
    name = TaskState.Name(state)
    return name.removeprefix('TASK_STATE_').lower().replace('_', '-')


def status_text(status) -> str:
    return get_message_text(status.message) if status.HasField('message') else ''


def artifact_texts(task) -> dict[str, str]:
    return {a.artifact_id: ''.join(get_text_parts(a.parts)) for a in task.artifacts}


def describe(response: StreamResponse) -> dict:
    """One stream event as a JSON-able dict (what kind, which task, state and text)."""
    kind = response.WhichOneof('payload')
    if kind == 'task':
        task = response.task
        return {
            'kind': 'task',
            'task_id': task.id,
            'context_id': task.context_id,
            'state': state_name(task.status.state),
            'text': status_text(task.status),
            'artifacts': artifact_texts(task),
        }
    if kind == 'status_update':
        update = response.status_update
        return {
            'kind': 'status',
            'task_id': update.task_id,
            'context_id': update.context_id,
            'state': state_name(update.status.state),
            'text': status_text(update.status),
        }
    if kind == 'artifact_update':
        update = response.artifact_update
        return {
            'kind': 'artifact',
            'task_id': update.task_id,
            'context_id': update.context_id,
            'artifact_id': update.artifact.artifact_id,
            'name': update.artifact.name,
            'append': update.append,
            'last_chunk': update.last_chunk,
            'text': ''.join(get_text_parts(update.artifact.parts)),
        }
    if kind == 'message':
        message = response.message
        return {
            'kind': 'message',
            'task_id': message.task_id,
            'context_id': message.context_id,
            'text': get_message_text(message),
        }
    raise Unexpected(f'a stream event with no payload: {response}')


async def stream(client, message, label: str, on_event=None) -> list[dict]:
    """Sends `message` through the SDK's streaming send; every event, printed as it comes."""
    events = []
    request = SendMessageRequest(message=message)
    async for response in client.send_message(request):
        event = describe(response)
        emit(label, **event)
        events.append(event)
        if on_event is not None:
            await on_event(event)
    if not events:
        raise Unexpected(f'{label}: the stream ended without an event')
    return events


def last_state(events: list[dict], label: str) -> str:
    states = [e['state'] for e in events if 'state' in e]
    if not states:
        raise Unexpected(f'{label}: no event carried a task state')
    return states[-1]


def one_task(events: list[dict], label: str) -> tuple[str, str]:
    ids = {(e['task_id'], e['context_id']) for e in events if e.get('task_id')}
    if len(ids) != 1:
        raise Unexpected(f'{label}: expected one task, saw {sorted(ids)}')
    return ids.pop()


async def hitl(client) -> None:
    first = await stream(
        client,
        new_text_message('paint the fence', role=Role.ROLE_USER),
        'first',
    )
    task_id, context_id = one_task(first, 'first')
    state = last_state(first, 'first')
    if state != 'input-required':
        raise Unexpected(f'first: the stream ended {state}, not input-required')
    prompt = next(
        (e['text'] for e in reversed(first) if e.get('state') == 'input-required'),
        '',
    )
    if not prompt:
        raise Unexpected('first: input-required without a prompt text')
    emit('input_required', task_id=task_id, context_id=context_id, prompt=prompt)

    # The reply goes on the same task, in the same context.
    reply = new_text_message(
        'blue', role=Role.ROLE_USER, task_id=task_id, context_id=context_id
    )
    second = await stream(client, reply, 'second')
    if one_task(second, 'second') != (task_id, context_id):
        raise Unexpected('second: the reply was answered on another task or context')
    state = last_state(second, 'second')
    if state != 'completed':
        raise Unexpected(f'second: the stream ended {state}, not completed')
    answer = next(
        (e['text'] for e in reversed(second) if e.get('state') == 'completed'),
        '',
    )
    # Each artifact's text as a streaming client sees it: a task event is the task as it
    # stands; an artifact update appends its chunk, or replaces the text before.
    artifacts: dict[str, str] = {}
    for e in first + second:
        if e['kind'] == 'task':
            artifacts = dict(e['artifacts'])
        elif e['kind'] == 'artifact':
            before = artifacts.get(e['artifact_id'], '') if e['append'] else ''
            artifacts[e['artifact_id']] = before + e['text']

    task = await client.get_task(GetTaskRequest(id=task_id))
    got = state_name(task.status.state)
    emit(
        'get_task',
        task_id=task.id,
        context_id=task.context_id,
        state=got,
        text=status_text(task.status),
        artifacts=artifact_texts(task),
        history=[
            {'role': Role.Name(m.role), 'text': get_message_text(m)}
            for m in task.history
        ],
    )
    if got != 'completed':
        raise Unexpected(f'get_task: the task is {got}, not completed')
    emit('completed', task_id=task_id, answer=answer, artifacts=artifacts)


async def cancel(client) -> None:
    canceled = {}

    async def cancel_once_working(event: dict) -> None:
        if canceled or event.get('state') != 'working':
            return
        # Let the task get into its (slow) model call before canceling it.
        await asyncio.sleep(0.3)
        task = await client.cancel_task(CancelTaskRequest(id=event['task_id']))
        canceled['task'] = task
        emit(
            'cancel_task',
            task_id=task.id,
            context_id=task.context_id,
            state=state_name(task.status.state),
        )

    events = await stream(
        client,
        new_text_message('take your time', role=Role.ROLE_USER),
        'stream',
        on_event=cancel_once_working,
    )
    task_id, _ = one_task(events, 'stream')
    if not canceled:
        raise Unexpected('stream: the task never reported working, so it was not canceled')
    answered = state_name(canceled['task'].status.state)
    if answered != 'canceled':
        raise Unexpected(f'cancel_task: answered {answered}, not canceled')
    state = last_state(events, 'stream')
    if state != 'canceled':
        raise Unexpected(f'stream: ended {state}, not canceled')

    task = await client.get_task(GetTaskRequest(id=task_id))
    got = state_name(task.status.state)
    emit('get_task', task_id=task.id, context_id=task.context_id, state=got)
    if got != 'canceled':
        raise Unexpected(f'get_task: the task is {got}, not canceled')
    emit('canceled', task_id=task_id)


async def log_request(request: httpx.Request) -> None:
    """An httpx request hook: one `http` line per request the SDK sends."""
    rpc = None
    try:
        body = json.loads(request.content) if request.content else None
        if isinstance(body, dict):
            rpc = body.get('method')
    except (httpx.RequestNotRead, ValueError):
        pass
    emit(
        'http',
        method=request.method,
        path=request.url.path,
        rpc=rpc,
        a2a_version=request.headers.get('a2a-version'),
        authorization=request.headers.get('authorization') is not None,
    )


async def read_discovery_card(http: httpx.AsyncClient, url: str) -> AgentCard:
    """The card, read with the SDK's resolver at its default path and with no version header
    (the resolver is used before any client factory, which would add one to `http`)."""
    card = await A2ACardResolver(http, url).get_agent_card()
    interfaces = [
        {'url': i.url, 'binding': i.protocol_binding, 'version': i.protocol_version}
        for i in card.supported_interfaces
    ]
    schemes = {}
    for name, scheme in card.security_schemes.items():
        kind = scheme.WhichOneof('scheme')
        schemes[name] = {'kind': kind, **MessageToDict(getattr(scheme, kind))} if kind else {}
    first = interfaces[0] if interfaces else {}
    emit(
        'card',
        name=card.name,
        protocol_version=first.get('version'),
        url=first.get('url'),
        binding=first.get('binding'),
        streaming=card.capabilities.streaming,
        interfaces=interfaces,
        security_schemes=sorted(schemes),
        schemes=schemes,
        security=[sorted(r.schemes) for r in card.security_requirements],
    )
    return card


def factory_clients(http: httpx.AsyncClient, card: AgentCard):
    """Two clients of the SDK's factory for `card`: one that streams, one that does not."""
    streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
    plain = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
    return streaming, plain


async def basic(http: httpx.AsyncClient, url: str) -> None:
    card = await read_discovery_card(http, url)
    if not card.capabilities.streaming:
        raise Unexpected('the agent card does not offer streaming')
    streaming, plain = factory_clients(http, card)

    # Without streaming: one answer, the task as it ended.
    request = SendMessageRequest(message=new_text_message('say hello', role=Role.ROLE_USER))
    answers = [describe(response) async for response in plain.send_message(request)]
    if len(answers) != 1 or answers[0]['kind'] != 'task':
        raise Unexpected(f'send: expected one task, got {answers}')
    task = answers[0]
    emit(
        'send',
        task_id=task['task_id'],
        context_id=task['context_id'],
        state=task['state'],
        answer=task['text'],
        artifacts=task['artifacts'],
    )
    if task['state'] != 'completed':
        raise Unexpected(f'send: the task is {task["state"]}, not completed')
    first_task = task['task_id']

    # Streaming: every event, then the answer the completed state carried.
    events = await stream(
        streaming, new_text_message('say hello again', role=Role.ROLE_USER), 'stream'
    )
    task_id, _ = one_task(events, 'stream')
    state = last_state(events, 'stream')
    answer = next((e['text'] for e in reversed(events) if e.get('state') == 'completed'), '')
    emit('streamed', task_id=task_id, state=state, answer=answer)
    if state != 'completed':
        raise Unexpected(f'stream: ended {state}, not completed')

    task = await plain.get_task(GetTaskRequest(id=first_task))
    got = state_name(task.status.state)
    emit('get_task', task_id=task.id, state=got, answer=status_text(task.status))
    if got != 'completed':
        raise Unexpected(f'get_task: the task is {got}, not completed')

    # Cancel while the task works on its (slow) model call.
    canceled = {}

    async def cancel_once_working(event: dict) -> None:
        if canceled or event.get('state') != 'working':
            return
        await asyncio.sleep(0.3)
        task = await plain.cancel_task(CancelTaskRequest(id=event['task_id']))
        canceled['task'] = task
        emit('cancel_task', task_id=task.id, state=state_name(task.status.state))

    events = await stream(
        streaming,
        new_text_message('take your time', role=Role.ROLE_USER),
        'cancel_stream',
        on_event=cancel_once_working,
    )
    task_id, _ = one_task(events, 'cancel_stream')
    if not canceled:
        raise Unexpected('cancel_stream: the task never reported working, so it was not canceled')
    answered = state_name(canceled['task'].status.state)
    if answered != 'canceled':
        raise Unexpected(f'cancel_task: answered {answered}, not canceled')
    state = last_state(events, 'cancel_stream')
    if state != 'canceled':
        raise Unexpected(f'cancel_stream: ended {state}, not canceled')
    task = await plain.get_task(GetTaskRequest(id=task_id))
    got = state_name(task.status.state)
    emit('get_canceled', task_id=task.id, state=got)
    if got != 'canceled':
        raise Unexpected(f'get_canceled: the task is {got}, not canceled')
    emit('canceled', task_id=task_id)


def refusal(call: str, error: A2AClientError) -> dict:
    """What the SDK's error says, and the HTTP response it was raised for (its cause)."""
    seen = {'call': call, 'status': None, 'message': str(error)}
    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        response = cause.response
        seen['status'] = response.status_code
        seen['www_authenticate'] = response.headers.get('www-authenticate')
        try:
            body = response.json()
            seen['code'] = body.get('error', {}).get('code')
        except (httpx.ResponseNotRead, ValueError, AttributeError):
            pass
    return seen


async def unauthenticated(http: httpx.AsyncClient, url: str) -> None:
    card = await read_discovery_card(http, url)
    streaming, plain = factory_clients(http, card)
    for call, client in (('send', plain), ('stream', streaming)):
        request = SendMessageRequest(message=new_text_message('let me in', role=Role.ROLE_USER))
        try:
            async for response in client.send_message(request):
                raise Unexpected(f'{call}: answered without a credential: {describe(response)}')
        except A2AClientError as e:
            seen = refusal(call, e)
            emit('unauthorized', **seen)
            if seen['status'] != 401:
                raise Unexpected(f'{call}: {e!r} is not an HTTP 401') from e
        else:
            raise Unexpected(f'{call}: no error without a credential')


SCENARIOS = {'hitl': hitl, 'cancel': cancel}

# The scenarios that read the discovery card (no `A2A-Version` header); they take no PROTOCOL.
DISCOVERY_SCENARIOS = {'basic': basic, 'unauthenticated': unauthenticated}


PROTOCOLS = ('1.0', '0.3')


async def main(url: str, scenario: str, protocol: str | None, token: str | None) -> None:
    headers = {'Authorization': f'Bearer {token}'} if token else {}
    async with httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(60.0), trust_env=False
    ) as http:
        if scenario in DISCOVERY_SCENARIOS:
            http.event_hooks = {'request': [log_request], 'response': []}
            await DISCOVERY_SCENARIOS[scenario](http, url)
            return
        card = await A2ACardResolver(http, url).get_agent_card(
            http_kwargs={'headers': {'A2A-Version': protocol}}
        )
        interfaces = [
            {'url': i.url, 'binding': i.protocol_binding, 'version': i.protocol_version}
            for i in card.supported_interfaces
        ]
        emit(
            'card',
            name=card.name,
            version=card.version,
            streaming=card.capabilities.streaming,
            interfaces=interfaces,
        )
        if not interfaces or not interfaces[0]['version'].startswith(protocol):
            raise Unexpected(f'asked for an A2A {protocol} card, got {interfaces}')
        if not card.capabilities.streaming:
            raise Unexpected('the agent card does not offer streaming')
        factory = ClientFactory(ClientConfig(streaming=True, httpx_client=http))
        client = factory.create(card)
        async with client:
            await SCENARIOS[scenario](client)


def parse_args(args: list[str]) -> tuple[str, str, str | None, str | None] | None:
    """(URL, SCENARIO, PROTOCOL, TOKEN) from the command line; None if it is not a usage."""
    if len(args) < 2:
        return None
    url, scenario, rest = args[0], args[1], args[2:]
    if scenario in DISCOVERY_SCENARIOS:
        if len(rest) > 1:
            return None
        return url, scenario, None, (rest[0] if rest else None)
    if scenario not in SCENARIOS or len(rest) > 2:
        return None
    protocol = rest[0] if rest else PROTOCOLS[0]
    if protocol not in PROTOCOLS:
        return None
    return url, scenario, protocol, (rest[1] if len(rest) > 1 else None)


if __name__ == '__main__':
    parsed = parse_args(sys.argv[1:])
    if parsed is None:
        sys.exit(
            f'usage: {sys.argv[0]} URL {{{"|".join(SCENARIOS)}}} '
            f'[{"|".join(PROTOCOLS)} [TOKEN]]\n'
            f'       {sys.argv[0]} URL {{{"|".join(DISCOVERY_SCENARIOS)}}} [TOKEN]'
        )
    try:
        asyncio.run(asyncio.wait_for(main(*parsed), DEADLINE_SECS))
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        what = f'{type(e).__name__}: {e}'
        emit('error', message=what)
        print(
            f'a2a_sdk_client: {parsed[1]} ({parsed[2] or "discovery card"}): {what}',
            file=sys.stderr,
        )
        sys.exit(1)
