//! Trying a mechanism in a throwaway child: the one way this crate proves, before any real
//! child needs it, that the host gives a mechanism (the namespaces, a composed root).
//!
//! [`in_child`] forks; the child runs the trial and reports exactly `N` bytes through a pipe,
//! then exits; the parent reads them, reaps the child and returns them. A child that dies
//! before reporting (a crash, a kill) is an error naming its wait status, never a hang: the
//! pipe's write end closes with the child.

/// Runs `trial` in a forked child, handing it a function that reports `N` bytes to the
/// parent, and returns what it reported.
///
/// # Safety
/// `trial` runs between `fork` and `_exit` in a child of a possibly multi-threaded process:
/// it may make only async-signal-safe calls (no allocation, no lock) on values prepared
/// before the call.
pub(crate) unsafe fn in_child<const N: usize>(
    trial: impl FnOnce(&dyn Fn([u8; N])),
) -> Result<[u8; N], String> {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
    }
    let [read, write] = fds;
    // SAFETY: the child runs the caller's async-signal-safe trial, writes, and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let report = |bytes: [u8; N]| {
            // SAFETY: a write of a buffer on this stack to our pipe.
            unsafe { libc::write(write, bytes.as_ptr().cast(), N) };
        };
        trial(&report);
        // SAFETY: ending the child without running anything of the parent's.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: closing our copy of the write end; reading into a local buffer; reaping our child.
    unsafe {
        libc::close(write);
        if pid < 0 {
            let error = std::io::Error::last_os_error();
            libc::close(read);
            return Err(format!("fork: {error}"));
        }
        let mut report = [0u8; N];
        let mut got = 0usize;
        while got < N {
            let n = libc::read(read, report[got..].as_mut_ptr().cast(), N - got);
            if n > 0 {
                got += n as usize;
            } else if n == 0 || errno() != libc::EINTR {
                break;
            }
        }
        libc::close(read);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 && errno() == libc::EINTR {}
        if got != N {
            return Err(format!(
                "the probing child ended without an answer (wait status {status})"
            ));
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_the_child_reports_reaches_the_parent_and_silence_is_an_error() {
        // SAFETY: the trials only report or kill themselves.
        let said = unsafe { super::in_child::<3>(|report| report([1, 2, 3])) };
        assert_eq!(said, Ok([1, 2, 3]));
        let silent = unsafe {
            super::in_child::<3>(|_| {
                libc::kill(libc::getpid(), libc::SIGKILL);
            })
        };
        assert!(silent.unwrap_err().contains("without an answer"));
    }
}
