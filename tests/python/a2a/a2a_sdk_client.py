"""Drives a served Murmur capsule with the official A2A Python SDK (a2a-sdk 1.x).

    a2a_sdk_client.py URL SCENARIO [PROTOCOL]

URL is the door's base URL (`http://127.0.0.1:PORT`). PROTOCOL is the A2A version the card is
asked for (`A2A-Version` header): `1.0` (the default) or `0.3`; the SDK's client factory then
picks its transport from that card (JSON-RPC 1.0, or its v0.3 compat transport). SCENARIO is
one of:

- `hitl`: stream a message; the task must stop at `input-required` with a prompt; reply on the
  same task (its taskId and contextId), streamed too; the task must end `completed` with an
  answer.
- `cancel`: stream a message whose task keeps working; cancel it through the SDK while the
  stream is open; the task must be `canceled` (in the cancel answer, at the end of the stream,
  and in a later get-task).

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
    """The installed a2a-sdk must be the one tests/python/requirements.txt pins."""
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
from a2a.helpers import get_message_text, get_text_parts, new_text_message  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

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


SCENARIOS = {'hitl': hitl, 'cancel': cancel}


PROTOCOLS = ('1.0', '0.3')


async def main(url: str, scenario: str, protocol: str) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0), trust_env=False) as http:
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


if __name__ == '__main__':
    args = sys.argv[1:]
    if len(args) == 2:
        args.append(PROTOCOLS[0])
    if len(args) != 3 or args[1] not in SCENARIOS or args[2] not in PROTOCOLS:
        sys.exit(
            f'usage: {sys.argv[0]} URL {{{"|".join(SCENARIOS)}}} [{"|".join(PROTOCOLS)}]'
        )
    try:
        asyncio.run(asyncio.wait_for(main(*args), DEADLINE_SECS))
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        what = f'{type(e).__name__}: {e}'
        emit('error', message=what)
        print(f'a2a_sdk_client: {args[1]} ({args[2]}): {what}', file=sys.stderr)
        sys.exit(1)
