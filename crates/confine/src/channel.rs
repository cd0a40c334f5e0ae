//! The one way back from a child being set up to the host: a datagram socket pair made
//! before `fork`, over which the child sends the descriptors it made inside its namespaces
//! (the egress listeners, the seccomp listener) and, when a step fails, which step and why.
//!
//! The child's side only makes system calls on buffers on its stack (it runs between `fork`
//! and `exec`). The host reads everything once the child has started (or failed to).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What a message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// The egress proxy's listener, then one listener per forwarded port.
    Egress = 1,
    /// The seccomp filter's notification listener.
    Seccomp = 2,
    /// A step failed: its number and errno are the message's two words.
    Failed = 3,
}

/// The most descriptors one message carries.
pub(crate) const MAX_FDS: usize = 20;

/// Both ends: the host keeps `host`, the child inherits `child` (closed in the host once
/// the child has started).
pub(crate) struct Channel {
    pub host: OwnedFd,
    pub child: OwnedFd,
}

impl Channel {
    pub(crate) fn new() -> std::io::Result<Channel> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: socketpair succeeded: both descriptors are new and owned by nothing else.
        let (host, child) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Channel { host, child })
    }
}

/// Sends `words` and `fds` as one message of `kind` over `socket`. Async-signal-safe.
///
/// # Safety
/// `socket` and every fd in `fds` are open descriptors.
pub(crate) unsafe fn send(
    socket: RawFd,
    kind: Kind,
    words: [i32; 2],
    fds: &[RawFd],
) -> Result<(), i32> {
    let count = fds.len().min(MAX_FDS);
    let mut payload = [0u8; 9];
    payload[0] = kind as u8;
    payload[1..5].copy_from_slice(&words[0].to_ne_bytes());
    payload[5..9].copy_from_slice(&words[1].to_ne_bytes());
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // Aligned for cmsghdr, big enough for MAX_FDS descriptors.
    let mut control = [0u64; 16];
    // SAFETY: plain system calls on the caller's descriptors and buffers on this stack.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        if count > 0 {
            let space = libc::CMSG_SPACE((count * size_of::<RawFd>()) as u32) as usize;
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = space;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN((count * size_of::<RawFd>()) as u32) as usize;
            let data = libc::CMSG_DATA(header).cast::<RawFd>();
            for (i, fd) in fds.iter().take(count).enumerate() {
                data.add(i).write_unaligned(*fd);
            }
        }
        if libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) < 0 {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// One message the host received.
#[derive(Debug)]
pub(crate) struct Received {
    pub kind: Option<Kind>,
    pub words: [i32; 2],
    pub fds: Vec<OwnedFd>,
}

/// Every message waiting on `host`, without blocking.
pub(crate) fn receive_all(host: &OwnedFd) -> Vec<Received> {
    let mut messages = Vec::new();
    // A child sends a handful of messages; more is a bug, never a reason to loop for ever.
    for _ in 0..16 {
        let mut payload = [0u8; 9];
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        let mut control = [0u64; 16];
        // SAFETY: recvmsg into buffers on this stack; the descriptors it hands over are new
        // and owned by us alone (MSG_CMSG_CLOEXEC).
        unsafe {
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = size_of_val(&control);
            let read = libc::recvmsg(
                host.as_raw_fd(),
                &mut message,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            );
            if read <= 0 {
                break;
            }
            let mut fds = Vec::new();
            let mut header = libc::CMSG_FIRSTHDR(&message);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET
                    && (*header).cmsg_type == libc::SCM_RIGHTS
                {
                    let bytes = (*header).cmsg_len - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(header).cast::<RawFd>();
                    for i in 0..bytes / size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                header = libc::CMSG_NXTHDR(&message, header);
            }
            let kind = match payload[0] {
                1 => Some(Kind::Egress),
                2 => Some(Kind::Seccomp),
                3 => Some(Kind::Failed),
                _ => None,
            };
            let word =
                |at: usize| i32::from_ne_bytes(payload[at..at + 4].try_into().unwrap_or([0; 4]));
            messages.push(Received {
                kind: (read as usize == payload.len()).then_some(kind).flatten(),
                words: [word(1), word(5)],
                fds,
            });
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_and_words_cross_in_one_message() {
        let channel = Channel::new().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: both descriptors are open.
        unsafe {
            send(
                channel.child.as_raw_fd(),
                Kind::Seccomp,
                [7, -3],
                &[file.as_raw_fd(), file.as_raw_fd()],
            )
            .unwrap();
            send(
                channel.child.as_raw_fd(),
                Kind::Failed,
                [4, libc::EPERM],
                &[],
            )
            .unwrap();
        }
        let received = receive_all(&channel.host);
        assert_eq!(received.len(), 2);
        assert_eq!(received[0].kind, Some(Kind::Seccomp));
        assert_eq!(received[0].words, [7, -3]);
        assert_eq!(received[0].fds.len(), 2);
        assert_eq!(received[1].kind, Some(Kind::Failed));
        assert_eq!(received[1].words, [4, libc::EPERM]);
        assert!(receive_all(&channel.host).is_empty(), "nothing more waits");
    }
}
