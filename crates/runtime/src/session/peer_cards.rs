//! The agent cards of the named `peers:`: fetched at `mur install` to pin them in
//! `murmur.lock`, and again when a session starts to hold them to their pins.
//!
//! What this module promises:
//!
//! - **Only an allowed peer is contacted.** A card is fetched ([`fetch_card`]) only when the
//!   capsule's `capabilities.network.allow` permits the peer's URL (the check the host's
//!   `murmur:message/send` path makes, [`NetworkPolicy::permits`]); otherwise no connection is
//!   made and the card is [`CardError::NotAllowed`]. The fetch presents the peer entry's
//!   credential when it is set (a card endpoint that wants none ignores it), and is bounded as
//!   [`PeerClient::get_card`] bounds it (1 MiB, 10 s, no redirect).
//! - **A card is pinned by its bytes**: the sha256 (hex) of exactly what was read.
//! - **At session start** ([`check`]), the card of every named peer that is pinned, or that
//!   the manifest does not describe, is fetched, all at once (a described, unpinned peer is
//!   offered with its description, `W-A2A-028`, and not contacted before it is asked):
//!   - pinned and different: the session is refused (`E-A2A-027`, both digests named) before the
//!     model is called;
//!   - not pinned: used, with `W-A2A-028`;
//!   - not fetched (not allowed, unreachable, not a card): refused (`E-A2A-029`) when the
//!     manifest gives no `description` (the model could not be told what the peer does), else
//!     offered with the manifest's description, with `W-A2A-030`.
//! - **Record and replay.** Under `mur run --record` each read at session start (the card's
//!   bytes, or why there were none) is kept in the cassette; under `--replay` it is answered
//!   from there and the peer is not contacted: the recorded card is held to its pin as a live
//!   one is (a card re-pinned since the recording is refused), and the model is told what the
//!   recorded card says, so the drivers' requests replay as they were recorded. A read the
//!   cassette does not hold is [`CardError::Replayed`].
//! - **What the model is told** ([`CardSeen::description`]): the manifest's `description` when
//!   it gives one, else the card's name, description and skill names, cut to the length a
//!   manifest's description may have.

use std::sync::OnceLock;

use murmur_a2a::Version;
use murmur_a2a::client::{CardSummary, PeerClient, PeerError};
use murmur_manifest::Diagnostic;
use murmur_manifest::diagnostic::code;
use murmur_manifest::door::MAX_PEER_DESCRIPTION;
use murmur_manifest::network::NetworkRule;
use sha2::Digest;

use crate::grants::NetworkPolicy;
use crate::grants::cassette::{Cassette, PeerKind, RecordedBody};
use crate::grants::message::PeerCredential;
use crate::session::SessionError;
use crate::session::staging::Staged;

/// A named peer as the session offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardSeen {
    /// The entry's `name`.
    pub name: String,
    /// What the model is told the peer does (see the module docs).
    pub description: String,
    /// Whether the card offers streaming (`false` when no card was read).
    pub streaming: bool,
}

/// A card as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The sha256 (64 lowercase hex digits) of the card's bytes.
    pub sha256: String,
    /// What the card says.
    pub summary: CardSummary,
}

/// Why a peer's card was not read.
#[derive(Debug, thiserror::Error)]
pub enum CardError {
    /// `capabilities.network.allow` does not permit the peer's URL: it was not contacted.
    #[error("`capabilities.network.allow` does not permit {0}, so it was not contacted")]
    NotAllowed(String),
    /// The peer did not give a card.
    #[error("{0}")]
    Peer(#[from] PeerError),
    /// Replaying (`mur run --replay`): the read recorded failing (its code and message), or
    /// one the cassette does not hold. The peer was not contacted.
    #[error("{1} (replayed from the cassette)")]
    Replayed(String, String),
}

/// One named peer and what fetching its card gave.
#[derive(Debug)]
pub struct PeerCard {
    /// The entry's `name`.
    pub name: String,
    /// The entry's `url`.
    pub url: String,
    /// The entry's `description`.
    pub description: Option<String>,
    pub fetched: Result<Fetched, CardError>,
}

/// The client every card fetch uses, made once: it trusts the system's roots and the
/// certificates of `$MURMUR_CA_FILE`, as the host's send path does.
fn client() -> Result<&'static PeerClient, String> {
    static CLIENT: OnceLock<Result<PeerClient, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let ca_file = std::env::var_os("MURMUR_CA_FILE").map(std::path::PathBuf::from);
            PeerClient::trusting(Version::V1_0, ca_file.as_deref())
                .map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The card of the peer at `url`, when `allow` permits it, presenting its entry's credential
/// from `credentials` when that is set. With a `cassette`: recording, the read (the card's
/// bytes, or why there were none) is kept in it; replaying, it is answered from it and the
/// peer is not contacted.
pub async fn fetch_card(
    url: &str,
    allow: &[NetworkRule],
    credentials: &[PeerCredential],
    cassette: Option<&Cassette>,
) -> Result<Fetched, CardError> {
    let policy = NetworkPolicy::allow(allow.to_vec());
    let permitted = url
        .parse::<http::Uri>()
        .is_ok_and(|uri| policy.permits(&uri));
    if !permitted {
        return Err(CardError::NotAllowed(url.to_string()));
    }
    let request = serde_json::json!({});
    if let Some(cassette) = cassette.filter(|c| c.is_replaying()) {
        let answer = cassette
            .serve_peer(PeerKind::Card, url, &request)
            .map_err(|why| {
                CardError::Replayed("E-RUN-029".into(), format!("the replay stopped: {why}"))
            })?;
        if let Some(error) = answer.get("error") {
            let text = |key: &str| error[key].as_str().unwrap_or_default().to_string();
            return Err(CardError::Replayed(text("code"), text("message")));
        }
        let bytes = serde_json::from_value::<RecordedBody>(answer.clone())
            .map_err(|error| {
                CardError::Replayed(
                    "E-RUN-030".into(),
                    format!("the cassette's recorded agent card cannot be read: {error}"),
                )
            })?
            .bytes();
        let summary = CardSummary::parse(&bytes)?;
        return Ok(Fetched {
            sha256: hex::encode(sha2::Sha256::digest(&bytes)),
            summary,
        });
    }
    let fetched = fetch_live(url, credentials).await;
    if let Some(cassette) = cassette {
        let answer = match &fetched {
            Ok((bytes, _)) => {
                serde_json::to_value(RecordedBody::of(bytes)).unwrap_or(serde_json::Value::Null)
            }
            Err(error) => serde_json::json!({"error": {
                "code": murmur_manifest::Coded::code(error),
                "message": error.to_string(),
            }}),
        };
        cassette.record_peer(PeerKind::Card, url, request, answer);
    }
    let (bytes, summary) = fetched?;
    Ok(Fetched {
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        summary,
    })
}

/// The card of the peer at `url` as it serves it now: its bytes and what it says.
async fn fetch_live(
    url: &str,
    credentials: &[PeerCredential],
) -> Result<(Vec<u8>, CardSummary), PeerError> {
    let headers: Vec<(String, String)> = credentials
        .iter()
        .find(|entry| entry.peer.matches(url))
        .and_then(|entry| Some(entry.peer.presented()?.header(entry.value.as_deref()?)))
        .into_iter()
        .collect();
    let client = client().map_err(|detail| PeerError::Unreachable {
        url: url.to_string(),
        detail,
    })?;
    client.get_card(url, &headers).await
}

/// The cards of `peers` (`(name, url, description)`), fetched all at once, in their order
/// (through `cassette` when there is one: [`fetch_card`]).
pub async fn fetch_cards(
    peers: Vec<(String, String, Option<String>)>,
    allow: &[NetworkRule],
    credentials: &[PeerCredential],
    cassette: Option<&Cassette>,
) -> Vec<PeerCard> {
    let fetches = peers
        .iter()
        .map(|(_, url, _)| fetch_card(url, allow, credentials, cassette));
    let results = futures_join(fetches).await;
    peers
        .into_iter()
        .zip(results)
        .map(|((name, url, description), fetched)| PeerCard {
            name,
            url,
            description,
            fetched,
        })
        .collect()
}

/// Every future of `futures`, polled together; their outputs in order.
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<std::pin::Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (slot, future) in done.iter_mut().zip(pending.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(output) => *slot = Some(output),
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// The named peers of `capsule` and their cards, as `mur install` pins them.
pub async fn fetch_for_install(
    capsule: &murmur_manifest::CapsuleManifest,
    credentials: &[PeerCredential],
) -> Vec<PeerCard> {
    let peers = capsule
        .peers
        .iter()
        .filter_map(|peer| {
            Some((
                peer.name.clone()?,
                peer.url.clone(),
                peer.description.clone(),
            ))
        })
        .collect();
    fetch_cards(
        peers,
        &capsule.capabilities.network.allow,
        credentials,
        None,
    )
    .await
}

/// What the model is told of a peer whose manifest entry gives no description: the card's
/// name, description and skill names, at most [`MAX_PEER_DESCRIPTION`] characters. `None`
/// when the card says none of them.
pub fn described(summary: &CardSummary) -> Option<String> {
    let clean = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut parts = Vec::new();
    let name = clean(&summary.name);
    let description = clean(&summary.description);
    match (name.is_empty(), description.is_empty()) {
        (false, false) => parts.push(format!("{name}: {description}")),
        (false, true) => parts.push(name),
        (true, false) => parts.push(description),
        (true, true) => {}
    }
    let skills: Vec<String> = summary
        .skills
        .iter()
        .map(|skill| clean(skill))
        .filter(|skill| !skill.is_empty())
        .collect();
    if !skills.is_empty() {
        parts.push(format!("Skills: {}.", skills.join(", ")));
    }
    if parts.is_empty() {
        return None;
    }
    let text = parts.join(" ");
    Some(match text.char_indices().nth(MAX_PEER_DESCRIPTION) {
        Some((at, _)) => text[..at].to_string(),
        None => text,
    })
}

/// The first 12 hex digits of a sha256, as messages show it.
fn short(sha256: &str) -> &str {
    &sha256[..sha256.len().min(12)]
}

/// Fetches the card of every named peer of `staged` and holds it to its pin (see the module
/// docs): the peers as the model will be offered them, in manifest order, and the warnings
/// found; or the error that refuses the session.
pub async fn check(staged: &Staged) -> Result<(Vec<CardSeen>, Vec<Diagnostic>), SessionError> {
    // A card is read at the start only to hold it to its pin, or to tell the model what a
    // peer the manifest does not describe does: a described, unpinned peer is not contacted
    // before it is asked.
    let (read, unread): (Vec<_>, Vec<_>) = staged
        .peer_tools
        .iter()
        .partition(|peer| peer.pinned_card_sha256.is_some() || peer.description.is_none());
    let peers = read
        .iter()
        .map(|peer| {
            (
                peer.name.clone(),
                peer.url.clone(),
                peer.description.clone(),
            )
        })
        .collect();
    // Under `--record` the reads are kept in the cassette; under `--replay` they are answered
    // from it, the peers not contacted, and held to their pins as a live read is.
    let cassette = staged.session_cassette();
    let cards = fetch_cards(
        peers,
        &staged.capsule.capabilities.network.allow,
        &staged.peers,
        cassette.as_ref(),
    )
    .await;
    let pins: Vec<Option<String>> = read
        .iter()
        .map(|peer| peer.pinned_card_sha256.clone())
        .collect();
    let (mut seen, mut warnings) = judge(cards, &pins)?;
    for peer in unread {
        warnings.push(
            Diagnostic::new(
                code::W_A2A_028,
                format!(
                    "peer `{}`'s agent card is not pinned in murmur.lock: the peer is offered with the manifest's description, its card unread",
                    peer.name
                ),
            )
            .hint("run `mur install` to pin its card; a later change is then refused"),
        );
        seen.push(CardSeen {
            name: peer.name.clone(),
            description: peer.description.clone().unwrap_or_default(),
            streaming: false,
        });
    }
    Ok((seen, warnings))
}

/// [`check`]'s verdict on `cards`, each held to its pin in `pins` (same order).
fn judge(
    cards: Vec<PeerCard>,
    pins: &[Option<String>],
) -> Result<(Vec<CardSeen>, Vec<Diagnostic>), SessionError> {
    let mut seen = Vec::new();
    let mut warnings = Vec::new();
    for (card, pin) in cards.into_iter().zip(pins) {
        let name = &card.name;
        match card.fetched {
            Ok(fetched) => {
                match pin {
                    Some(pinned) if *pinned != fetched.sha256 => {
                        return Err(SessionError {
                            code: code::E_A2A_027,
                            message: format!(
                                "peer `{name}`'s agent card changed since `mur install` pinned it (sha256 {} → {})",
                                short(pinned),
                                short(&fetched.sha256)
                            ),
                            hint: format!(
                                "review what {} now says of itself, then run `mur install` to pin it again",
                                card.url
                            ),
                            workdir: None,
                        });
                    }
                    Some(_) => {}
                    None => warnings.push(
                        Diagnostic::new(
                            code::W_A2A_028,
                            format!(
                                "peer `{name}`'s agent card is not pinned in murmur.lock: it is taken as {} serves it (sha256 {})",
                                card.url,
                                short(&fetched.sha256)
                            ),
                        )
                        .hint("run `mur install` to pin it; a later change is then refused"),
                    ),
                }
                let description = match card.description {
                    Some(description) => description,
                    None => described(&fetched.summary).ok_or_else(|| SessionError {
                        code: code::E_A2A_029,
                        message: format!(
                            "peer `{name}`'s agent card says nothing of what it does (no name, description or skill), and its `peers:` entry gives no `description`"
                        ),
                        hint: "give the entry a `description:` saying what the peer does".to_string(),
                        workdir: None,
                    })?,
                };
                seen.push(CardSeen {
                    name: name.clone(),
                    description,
                    streaming: fetched.summary.streaming,
                });
            }
            Err(why) => {
                let Some(description) = card.description else {
                    return Err(SessionError {
                        code: code::E_A2A_029,
                        message: format!(
                            "peer `{name}`'s agent card cannot be fetched: {why}; its `peers:` entry gives no `description`, so the model could not be told what it does"
                        ),
                        hint: format!(
                            "check that an agent serves its card at {}, or give the entry a `description:`",
                            card.url
                        ),
                        workdir: None,
                    });
                };
                warnings.push(
                    Diagnostic::new(
                        code::W_A2A_030,
                        format!(
                            "peer `{name}`'s agent card cannot be fetched: {why}; it is offered with the manifest's description, its card unchecked"
                        ),
                    )
                    .hint(format!("check that an agent serves its card at {}", card.url)),
                );
                seen.push(CardSeen {
                    name: name.clone(),
                    description,
                    streaming: false,
                });
            }
        }
    }
    Ok((seen, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str, description: &str, skills: &[&str]) -> CardSummary {
        CardSummary {
            name: name.into(),
            description: description.into(),
            skills: skills.iter().map(|s| s.to_string()).collect(),
            streaming: false,
        }
    }

    #[test]
    fn a_cards_description_names_it_says_what_it_does_and_lists_its_skills() {
        assert_eq!(
            described(&summary(
                "Researcher",
                "Finds\n papers.",
                &["Search", " ", "Cite"]
            ))
            .unwrap(),
            "Researcher: Finds papers. Skills: Search, Cite."
        );
        assert_eq!(described(&summary("R", "", &[])).unwrap(), "R");
        assert_eq!(described(&summary("", "", &[" "])), None);
        let long = described(&summary("x", &"y ".repeat(5_000), &[])).unwrap();
        assert_eq!(long.chars().count(), MAX_PEER_DESCRIPTION);
    }

    fn card(name: &str, description: Option<&str>, fetched: Option<char>) -> PeerCard {
        PeerCard {
            name: name.into(),
            url: format!("http://127.0.0.1:9/{name}"),
            description: description.map(str::to_string),
            fetched: match fetched {
                Some(digit) => Ok(Fetched {
                    sha256: digit.to_string().repeat(64),
                    summary: CardSummary {
                        streaming: true,
                        ..summary("Researcher", "Finds papers.", &["Search"])
                    },
                }),
                None => Err(CardError::NotAllowed(format!("http://127.0.0.1:9/{name}"))),
            },
        }
    }

    #[test]
    fn a_pinned_card_that_changed_refuses_the_session_naming_both_digests() {
        let error = judge(
            vec![
                card("ok", None, Some('a')),
                card("changed", None, Some('b')),
            ],
            &[Some("a".repeat(64)), Some("c".repeat(64))],
        )
        .unwrap_err();
        assert_eq!(error.code, "E-A2A-027");
        assert_eq!(
            error.message,
            "peer `changed`'s agent card changed since `mur install` pinned it (sha256 cccccccccccc → bbbbbbbbbbbb)"
        );
        assert!(error.hint.contains("mur install"), "{}", error.hint);
    }

    #[test]
    fn pinned_unpinned_and_unfetched_cards_are_used_warned_or_refused() {
        let (seen, warnings) = judge(
            vec![
                card("pinned", None, Some('a')),
                card("unpinned", Some("Reviews."), Some('a')),
                card("away", Some("Summarises."), None),
            ],
            &[Some("a".repeat(64)), None, Some("a".repeat(64))],
        )
        .unwrap();
        assert_eq!(
            seen,
            [
                CardSeen {
                    name: "pinned".into(),
                    description: "Researcher: Finds papers. Skills: Search.".into(),
                    streaming: true
                },
                CardSeen {
                    name: "unpinned".into(),
                    description: "Reviews.".into(),
                    streaming: true
                },
                CardSeen {
                    name: "away".into(),
                    description: "Summarises.".into(),
                    streaming: false
                },
            ]
        );
        let codes: Vec<&str> = warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, ["W-A2A-028", "W-A2A-030"]);
        assert!(
            warnings[1].message.contains("not contacted"),
            "{}",
            warnings[1]
        );

        let error = judge(vec![card("away", None, None)], &[None]).unwrap_err();
        assert_eq!(error.code, "E-A2A-029");
        assert!(
            error
                .message
                .contains("peer `away`'s agent card cannot be fetched")
        );
        assert!(error.hint.contains("description:"), "{}", error.hint);
    }

    #[tokio::test]
    async fn a_peer_outside_the_allowlist_is_never_contacted() {
        // A listener that would see any connection.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let other = NetworkRule::parse("http://127.0.0.1:1").unwrap();
        let error = fetch_card(&url, &[other], &[], None).await.unwrap_err();
        assert!(matches!(error, CardError::NotAllowed(_)), "{error}");
        assert!(listener.accept().is_err(), "the peer was contacted");
    }
}
