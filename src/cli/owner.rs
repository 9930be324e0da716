//! The default owner of a lock the CLI takes: `user@host:pid`, with the user from the
//! environment or, failing that, from the system's user database.

/// `user@host:pid`, the default owner. The user is `$USER` (else `$LOGNAME`), else the
/// name the system's user database gives the process's uid, else the uid itself.
pub fn default_owner() -> String {
    let user = ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(user_of_uid);
    format!("{user}@{}:{}", hostname(), std::process::id())
}

/// The name of the process's uid in the user database (`getpwuid_r`), or the uid in
/// digits when it has none.
pub fn user_of_uid() -> String {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    user_name(uid).unwrap_or_else(|| uid.to_string())
}

fn user_name(uid: libc::uid_t) -> Option<String> {
    // SAFETY: sysconf has no preconditions; -1 (no limit or unknown) falls back below.
    let suggested = unsafe { libc::sysconf(libc::_SC_GETPW_R_SIZE_MAX) };
    let mut size = usize::try_from(suggested).unwrap_or(0).clamp(1024, 1 << 16);
    loop {
        let mut buffer = vec![0 as libc::c_char; size];
        // SAFETY: passwd is plain data, for which all zeroes is a valid value.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call, and the buffer for its length;
        // getpwuid_r writes the entry's strings into the buffer and nowhere else.
        let code = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        if code == libc::ERANGE && size < 1 << 20 {
            size *= 2;
            continue;
        }
        if code != 0 || found.is_null() || entry.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success pw_name points at a NUL-terminated string in `buffer`, which
        // is alive here.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
        let name = name.to_string_lossy().into_owned();
        return (!name.is_empty()).then_some(name);
    }
}

fn hostname() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length, and gethostname writes at most that.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return "localhost".into();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}
