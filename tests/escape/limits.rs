//! Escape cases: memory has a ceiling. A tool returns 100 MiB of `data` in a session: the call
//! fails with E-RUN-023 and the data is dropped at once (the session goes on, and `mur` does
//! not hold multiples of it). The door's cases are in `door.rs`.

use serde_json::json;

use super::workdir::{Setup, probe_call, text};

#[test]
fn a_tool_returning_100_mib_of_data_fails_cleanly_and_the_session_goes_on() {
    let setup = Setup::new(
        |_| {
            vec![
                probe_call("b1", json!({"action": "big_data", "mib": 100})),
                text("went on"),
            ]
        },
        &[],
        "",
    );
    let session = setup.run();
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let calls = session.events("tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["error"]["code"], "E-RUN-023", "{:#}", calls[0]);
    assert!(
        calls[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("104857600 bytes of data, over the 10485760 byte limit"),
        "{:#}",
        calls[0]
    );
    assert_eq!(session.report["exit_status"], "ok");
    // None of the data reached the trace.
    let trace = std::fs::read_to_string(session.workdir.join("trace.jsonl")).unwrap();
    assert!(
        trace.len() < 1 << 20,
        "the trace holds the data: {} bytes",
        trace.len()
    );
}
