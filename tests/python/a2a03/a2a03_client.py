"""Drives a served Murmur capsule with the official A2A Python SDK of the 0.3 line (a2a-sdk 0.3.26).

    a2a03_client.py URL SCENARIO [TOKEN]

URL is the door's base URL (`http://127.0.0.1:PORT`). With TOKEN, every request (the card
fetch too) carries `Authorization: Bearer TOKEN`. The card is read the way this SDK reads it
by default: `/.well-known/agent-card.json`, no `A2A-Version` header, so the door answers with
its discovery card; the client factory then picks its transport from that card's 0.3 fields
(`url`, `preferredTransport`). SCENARIO is one of:

- `basic`: read the card; send a message without streaming (the task must be `completed`);
  stream a message (it must end `completed`); get the first task (`completed`); stream a
  message whose task keeps working, cancel it through the SDK while the stream is open, and
  the task must be `canceled` (in the cancel answer, at the end of the stream, and in a later
  get-task).
- `unauthenticated`: read the card (it is public); send a message, without and with
  streaming: the SDK must raise its HTTP error with status 401 each time.

Every observation is printed as one JSON line on stdout (`{"event": ...}`), so the Rust test
(tests/a2a_python.rs) can assert on them; each HTTP request the SDK makes is one `http` line
(what it asked, which JSON-RPC method, which headers). Anything unexpected prints an `error`
line and a message on stderr, and exits 1. Only the SDK's own client classes talk to the door:
the card resolver, the client factory, and the client's send_message / get_task / cancel_task.
"""

import asyncio
import importlib.metadata
import json
import pathlib
import sys


def check_environment() -> None:
    """The installed a2a-sdk must be the one the requirements.txt beside this file pins."""
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
            f'a2a03_client: a2a-sdk {installed or "is not installed"} in {sys.prefix}, '
            f'but {requirements} pins {pin}: run scripts/python-env a2a03'
        )


check_environment()

import httpx  # noqa: E402 - after the environment check, which names the fix

from a2a.client import (  # noqa: E402
    A2ACardResolver,
    A2AClientHTTPError,
    ClientConfig,
    ClientFactory,
    create_text_message_object,
)
from a2a.types import (  # noqa: E402
    Message,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
)
from a2a.utils import get_message_text, get_text_parts  # noqa: E402

# The whole scenario's limit: a hung stream fails the test instead of hanging it.
DEADLINE_SECS = 90


class Unexpected(Exception):
    """Something the scenario did not expect."""


def emit(event: str, **fields) -> None:
    print(json.dumps({'event': event, **fields}), flush=True)


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


def status_text(task: Task) -> str:
    message = task.status.message
    return get_message_text(message) if message else ''


def artifact_texts(task: Task) -> dict[str, str]:
    return {a.artifact_id: ''.join(get_text_parts(a.parts)) for a in task.artifacts or []}


def describe(event) -> dict:
    """One event of the SDK's send_message as a JSON-able dict: a `(task, update)` pair (the
    task as the SDK assembled it so far, and the update that changed it), or a message."""
    if isinstance(event, Message):
        return {
            'kind': 'message',
            'task_id': event.task_id,
            'context_id': event.context_id,
            'text': get_message_text(event),
        }
    task, update = event
    if update is None:
        return {
            'kind': 'task',
            'task_id': task.id,
            'context_id': task.context_id,
            'state': task.status.state.value,
            'text': status_text(task),
        }
    if isinstance(update, TaskStatusUpdateEvent):
        message = update.status.message
        return {
            'kind': 'status',
            'task_id': update.task_id,
            'context_id': update.context_id,
            'state': update.status.state.value,
            'text': get_message_text(message) if message else '',
            'final': update.final,
        }
    if isinstance(update, TaskArtifactUpdateEvent):
        return {
            'kind': 'artifact',
            'task_id': update.task_id,
            'context_id': update.context_id,
            'artifact_id': update.artifact.artifact_id,
            'text': ''.join(get_text_parts(update.artifact.parts)),
        }
    raise Unexpected(f'an event the SDK does not document: {event!r}')


def message(text: str) -> Message:
    return create_text_message_object(role=Role.user, content=text)


async def read_card(http: httpx.AsyncClient, url: str):
    """The card, read with the SDK's resolver at its default path and with no extra header."""
    card = await A2ACardResolver(http, url).get_agent_card()
    schemes = {
        name: {'type': scheme.root.type, 'scheme': getattr(scheme.root, 'scheme', None)}
        for name, scheme in (card.security_schemes or {}).items()
    }
    emit(
        'card',
        name=card.name,
        protocol_version=card.protocol_version,
        url=card.url,
        binding=card.preferred_transport,
        streaming=card.capabilities.streaming,
        security_schemes=sorted(schemes),
        schemes=schemes,
        security=[sorted(requirement) for requirement in card.security or []],
    )
    if not (card.protocol_version or '').startswith('0.3'):
        raise Unexpected(f'the card names protocol {card.protocol_version}, not 0.3')
    return card


def clients(http: httpx.AsyncClient, card):
    """Two clients of the SDK's factory for `card`: one that streams, one that does not."""
    streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
    plain = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
    return streaming, plain


async def stream(client, text: str, label: str, on_event=None) -> list[dict]:
    """Sends `text` through the SDK's streaming send; every event, printed as it comes."""
    events = []
    async for event in client.send_message(message(text)):
        described = describe(event)
        emit(label, **described)
        events.append(described)
        if on_event is not None:
            await on_event(described)
    if not events:
        raise Unexpected(f'{label}: the stream ended without an event')
    return events


def last_state(events: list[dict], label: str) -> str:
    states = [e['state'] for e in events if 'state' in e]
    if not states:
        raise Unexpected(f'{label}: no event carried a task state')
    return states[-1]


def one_task(events: list[dict], label: str) -> str:
    ids = {e['task_id'] for e in events if e.get('task_id')}
    if len(ids) != 1:
        raise Unexpected(f'{label}: expected one task, saw {sorted(ids)}')
    return ids.pop()


async def basic(http: httpx.AsyncClient, url: str) -> None:
    card = await read_card(http, url)
    if not card.capabilities.streaming:
        raise Unexpected('the agent card does not offer streaming')
    streaming, plain = clients(http, card)

    # Without streaming: one answer, the task as it ended.
    answers = [event async for event in plain.send_message(message('say hello'))]
    if len(answers) != 1 or isinstance(answers[0], Message):
        raise Unexpected(f'send: expected one task, got {answers!r}')
    task, _ = answers[0]
    emit(
        'send',
        task_id=task.id,
        context_id=task.context_id,
        state=task.status.state.value,
        answer=status_text(task),
        artifacts=artifact_texts(task),
    )
    if task.status.state.value != 'completed':
        raise Unexpected(f'send: the task is {task.status.state.value}, not completed')
    first_task = task.id

    # Streaming: every event, then the answer the completed state carried.
    events = await stream(streaming, 'say hello again', 'stream')
    task_id = one_task(events, 'stream')
    state = last_state(events, 'stream')
    answer = next((e['text'] for e in reversed(events) if e.get('state') == 'completed'), '')
    emit('streamed', task_id=task_id, state=state, answer=answer)
    if state != 'completed':
        raise Unexpected(f'stream: ended {state}, not completed')

    task = await plain.get_task(TaskQueryParams(id=first_task))
    emit(
        'get_task',
        task_id=task.id,
        state=task.status.state.value,
        answer=status_text(task),
    )
    if task.status.state.value != 'completed':
        raise Unexpected(f'get_task: the task is {task.status.state.value}, not completed')

    # Cancel while the task works on its (slow) model call.
    canceled = {}

    async def cancel_once_working(event: dict) -> None:
        if canceled or event.get('state') != 'working':
            return
        await asyncio.sleep(0.3)
        task = await plain.cancel_task(TaskIdParams(id=event['task_id']))
        canceled['task'] = task
        emit('cancel_task', task_id=task.id, state=task.status.state.value)

    events = await stream(
        streaming, 'take your time', 'cancel_stream', on_event=cancel_once_working
    )
    task_id = one_task(events, 'cancel_stream')
    if not canceled:
        raise Unexpected('cancel_stream: the task never reported working, so it was not canceled')
    if canceled['task'].status.state.value != 'canceled':
        raise Unexpected(
            f'cancel_task: answered {canceled["task"].status.state.value}, not canceled'
        )
    state = last_state(events, 'cancel_stream')
    if state != 'canceled':
        raise Unexpected(f'cancel_stream: ended {state}, not canceled')
    task = await plain.get_task(TaskQueryParams(id=task_id))
    emit('get_canceled', task_id=task.id, state=task.status.state.value)
    if task.status.state.value != 'canceled':
        raise Unexpected(f'get_canceled: the task is {task.status.state.value}, not canceled')
    emit('canceled', task_id=task_id)


def refusal(call: str, error: A2AClientHTTPError) -> dict:
    """What the SDK's HTTP error says, and the response it was raised for (its cause)."""
    seen = {'call': call, 'status': error.status_code, 'message': str(error)}
    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        response = cause.response
        seen['www_authenticate'] = response.headers.get('www-authenticate')
        try:
            body = response.json()
            seen['code'] = body.get('error', {}).get('code')
        except (httpx.ResponseNotRead, ValueError, AttributeError):
            pass
    return seen


async def unauthenticated(http: httpx.AsyncClient, url: str) -> None:
    card = await read_card(http, url)
    streaming, plain = clients(http, card)
    for call, client in (('send', plain), ('stream', streaming)):
        try:
            async for event in client.send_message(message('let me in')):
                raise Unexpected(f'{call}: answered without a credential: {describe(event)}')
        except A2AClientHTTPError as e:
            seen = refusal(call, e)
            emit('unauthorized', **seen)
            if e.status_code != 401:
                raise Unexpected(f'{call}: HTTP {e.status_code}, not 401') from e
        else:
            raise Unexpected(f'{call}: no error without a credential')


SCENARIOS = {'basic': basic, 'unauthenticated': unauthenticated}


async def main(url: str, scenario: str, token: str | None) -> None:
    headers = {'Authorization': f'Bearer {token}'} if token else {}
    async with httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(60.0),
        trust_env=False,
        event_hooks={'request': [log_request]},
    ) as http:
        await SCENARIOS[scenario](http, url)


if __name__ == '__main__':
    args = sys.argv[1:]
    if len(args) == 2:
        args.append(None)
    if len(args) != 3 or args[1] not in SCENARIOS:
        sys.exit(f'usage: {sys.argv[0]} URL {{{"|".join(SCENARIOS)}}} [TOKEN]')
    try:
        asyncio.run(asyncio.wait_for(main(*args), DEADLINE_SECS))
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        what = f'{type(e).__name__}: {e}'
        emit('error', message=what)
        print(f'a2a03_client: {args[1]}: {what}', file=sys.stderr)
        sys.exit(1)
