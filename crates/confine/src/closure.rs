//! What an allowlisted binary needs to execute, found without running it, so that Landlock
//! can give `Execute` to exactly those files and read access to the directories an
//! interpreter reads.
//!
//! What it promises:
//!
//! - **[`exec_closure`]** lists the canonical files a program needs to start, breadth-first,
//!   each once:
//!   - the program itself (a regular file; a bare name is looked up in the `PATH` given);
//!   - for a script (`#!`), its interpreter, and for `#!/usr/bin/env NAME` both `env` and
//!     `NAME` looked up in the `PATH` given; an interpreter that is itself a script is
//!     followed up to [`MAX_SCRIPT_DEPTH`] levels, as the kernel does;
//!   - for an ELF file, its program interpreter (`PT_INTERP`, the dynamic loader) and every
//!     library its `DT_NEEDED` entries name, transitively. A library is looked for, in this
//!     order, in the object's `DT_RPATH` (inherited along the chain of objects without
//!     `DT_RUNPATH`, as the loader does), its `DT_RUNPATH` (`$ORIGIN`, `$LIB` and `$PLATFORM`
//!     expanded), then in the system directories: those `/etc/ld.so.conf` lists (its
//!     `include`s followed, at most [`MAX_CONF_FILES`] files), `/lib`, `/lib64`, `/usr/lib`,
//!     `/usr/lib64`, the multiarch directories (`x86_64-linux-gnu`, `aarch64-linux-gnu`) under
//!     `/lib` and `/usr/lib`, `/usr/local/lib`, and each one's `glibc-hwcaps/*` subdirectory.
//!     A candidate counts only when it is an ELF file of the needing object's class, byte
//!     order and machine. The first match in the object's own paths is taken; in the system
//!     directories **every** match is kept, because the loader chooses among them through
//!     `/etc/ld.so.cache`, which this module does not read;
//!   - for a Python interpreter (see [`interpreter_runtime`]), the libraries its own extension
//!     modules (`lib-dynload/*.so`) need (`libssl` for `import ssl`, `libffi` for `ctypes`):
//!     the loader maps them when the module is imported. The modules themselves are not
//!     listed: they lie under the interpreter's runtime directories, which are read-only.
//!
//!   Symlinks are resolved: a library named `libc.so.6` is listed as the file it points to
//!   (Landlock grants an inode; following the link needs no right). A static binary has no
//!   interpreter and needs nothing but itself. Libraries need only to be read by the loader
//!   (mapping a file executable is not an `Execute` under Landlock); only the program and the
//!   loader are `execve`d. They are all listed together because a library may be run as a
//!   program too (the loader itself is one).
//!
//!   Not in it: what a program opens at run time by a name it computes (`dlopen` of a plugin,
//!   the NSS modules glibc loads for `getpwnam`, a `gconv` module), `LD_LIBRARY_PATH` and
//!   `LD_PRELOAD` (the children get a fixed environment), relative `DT_NEEDED` paths (they
//!   depend on the child's working directory), the legacy `tls`/`haswell` search
//!   subdirectories, and programs a script runs (a script's `ls` needs `ls` allowlisted).
//!   Libraries named but not found are reported in [`ExecClosure::unresolved`], never fatal.
//!
//! - **Bounded**, whatever the files hold: at most [`MAX_FILES`] files in a closure; a file
//!   larger than [`MAX_FILE_BYTES`] is listed but not parsed; only the ELF header, program
//!   headers, `PT_INTERP` (at most 4 KiB), `PT_DYNAMIC` (at most 64 KiB) and the strings it
//!   names (4 KiB each, at most [`MAX_NEEDED`] libraries per file) are read, lazily; at most
//!   [`MAX_PROBES`] candidate library paths are examined and [`MAX_NOTES`] notes kept; nothing
//!   is opened that is not a regular file (a FIFO never blocks it), and nothing is executed.
//!   A malformed ELF file is listed (when it is a program) and not followed: never a panic.
//!
//! - **[`interpreter_runtime`]** lists the existing directories a known interpreter reads
//!   (read-only, never `Execute`), derived from its name and place without running it:
//!   - Python (`python`, `python2`, `python3`, `pythonX.Y`): the version from the canonical
//!     name (`python3.11`), or else every `python3.*` directory under its prefix's `lib`;
//!     then `<prefix>/lib/pythonX.Y`, `<prefix>/lib64/pythonX.Y`, `/usr/lib/pythonX.Y`,
//!     `/usr/local/lib/pythonX.Y`, `/usr/lib/python3/dist-packages`, `/etc/pythonX.Y` (Debian
//!     links `sitecustomize.py` there); for a virtualenv (`pyvenv.cfg` beside or above the
//!     program as named, before symlinks are resolved) the venv itself and the stdlib of the
//!     `home` it names;
//!   - Node (`node`, `nodejs`): `/usr/lib/node_modules`, `/usr/share/nodejs`,
//!     `/usr/local/lib/node_modules`, `/usr/lib/<multiarch>/nodejs`,
//!     `<prefix>/lib/node_modules`;
//!   - Perl (`perl`, `perlX.Y.Z`): `/usr/share/perl*`, `/usr/lib/<multiarch>/perl*`,
//!     `/usr/local/share/perl*`, `/usr/local/lib/<multiarch>/perl*`, `<prefix>/lib/perl5`,
//!     `/etc/perl`;
//!   - Ruby (`ruby`, `rubyX.Y`): `/usr/lib/ruby`, `/usr/lib/<multiarch>/ruby`,
//!     `/usr/share/rubygems-integration`, `/var/lib/gems`, `/usr/local/lib/site_ruby`,
//!     `<prefix>/lib/ruby`;
//!   - shells (`sh`, `bash`, `dash`, …) and anything else: none of their own;
//!   - and for every program, the system data programs commonly read: `/usr/share/zoneinfo`
//!     (time zones, `/etc/localtime` points there), `/usr/lib/locale` and `/usr/share/locale`
//!     (locales and message catalogs), `/usr/lib/<multiarch>/gconv` and `/usr/lib64/gconv`
//!     (glibc's character set converters, loaded by `iconv`).
//!
//!   Directories are canonical, each once, and only those that exist.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use object::elf;
use object::read::ReadRef;
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::{Endianness, ReadCache};

/// At most this many files in one closure.
pub const MAX_FILES: usize = 512;
/// A file larger than this is listed but not parsed.
pub const MAX_FILE_BYTES: u64 = 8 << 30;
/// Script interpreters followed at most this deep (a script whose interpreter is a script…).
pub const MAX_SCRIPT_DEPTH: usize = 4;
/// At most this many `DT_NEEDED` entries are read from one file.
pub const MAX_NEEDED: usize = 1024;
/// At most this many candidate library paths are examined in one closure.
pub const MAX_PROBES: usize = 65_536;
/// At most this many notes in [`ExecClosure::unresolved`] (then a count of the rest).
pub const MAX_NOTES: usize = 256;
/// At most this many files of `/etc/ld.so.conf` and its includes are read.
pub const MAX_CONF_FILES: usize = 64;

/// Where the ELF identification holds the class and the byte order.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;
/// The longest `#!` line the kernel reads.
const SHEBANG_BYTES: usize = 256;
/// The largest `PT_INTERP` and `PT_DYNAMIC` segments read.
const MAX_INTERP_BYTES: u64 = 4096;
const MAX_DYNAMIC_BYTES: u64 = 64 << 10;
/// The longest string read from the dynamic string table.
const MAX_STRING_BYTES: u64 = 4096;
/// At most this many search directories from `DT_RPATH`/`DT_RUNPATH` of one file.
const MAX_OBJECT_PATHS: usize = 64;
/// The multiarch directory names looked for under `/lib` and `/usr/lib`.
const MULTIARCH: &[&str] = &["x86_64-linux-gnu", "aarch64-linux-gnu"];

/// What the programs given to [`exec_closure`] need to execute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecClosure {
    /// Canonical regular files needing `Execute` and `ReadFile`: the programs, their
    /// interpreters and loaders, and the libraries they load. Each once, in the order found.
    pub executables: Vec<PathBuf>,
    /// What was named but not found or not followed, for diagnostics (e.g.
    /// `libfoo.so.1 (needed by /usr/bin/bar)`).
    pub unresolved: Vec<String>,
}

/// The ELF identity a library must share with the object needing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ElfKind {
    is_64: bool,
    big_endian: bool,
    machine: u16,
}

/// What one ELF file asks of the loader.
#[derive(Debug, Default)]
struct ElfNeeds {
    interpreter: Option<PathBuf>,
    needed: Vec<String>,
    rpath: Vec<String>,
    runpath: Vec<String>,
}

/// One file waiting in the breadth-first walk.
struct Pending {
    path: PathBuf,
    /// Whether it is listed itself (an extension module is only followed).
    listed: bool,
    /// Script levels above it.
    depth: usize,
    /// `DT_RPATH` directories of the objects that loaded it, when none had `DT_RUNPATH`.
    inherited_rpath: Vec<PathBuf>,
}

/// The breadth-first walk of [`exec_closure`], with its bounds.
struct Walk {
    closure: ExecClosure,
    queue: VecDeque<Pending>,
    /// Files listed, files followed (read), and (file, listed) pairs ever queued.
    listed: HashSet<PathBuf>,
    followed: HashSet<PathBuf>,
    queued: HashSet<(PathBuf, bool)>,
    /// Candidate library paths examined so far, against [`MAX_PROBES`].
    probes: usize,
    /// What a name resolved to in the system directories, per ELF kind.
    system: HashMap<(String, ElfKind), Vec<PathBuf>>,
    /// Notes left off past [`MAX_NOTES`].
    notes_left_off: usize,
}

impl Walk {
    fn enqueue(&mut self, item: Pending) {
        if self.queued.len() >= 4 * MAX_FILES {
            self.note(format!(
                "more than {} files to examine: {} and what follows not examined",
                4 * MAX_FILES,
                item.path.display()
            ));
            return;
        }
        if self.queued.insert((item.path.clone(), item.listed)) {
            self.queue.push_back(item);
        }
    }

    fn note(&mut self, note: String) {
        if self.closure.unresolved.len() < MAX_NOTES {
            self.closure.unresolved.push(note);
        } else {
            self.notes_left_off += 1;
        }
    }
}

/// The canonical files `programs` need to execute: see the module doc. `path_var` is the
/// `PATH` the children get, against which bare names and `#!/usr/bin/env NAME` are looked up.
pub fn exec_closure(programs: &[PathBuf], path_var: &str) -> ExecClosure {
    let system_dirs = system_library_dirs();
    let mut walk = Walk {
        closure: ExecClosure::default(),
        queue: VecDeque::new(),
        listed: HashSet::new(),
        followed: HashSet::new(),
        queued: HashSet::new(),
        probes: 0,
        system: HashMap::new(),
        notes_left_off: 0,
    };
    let mut modules: Vec<PathBuf> = Vec::new();
    for program in programs {
        let found = if program.components().count() == 1 && !program.is_absolute() {
            lookup_in_path(&program.to_string_lossy(), path_var)
        } else {
            std::fs::canonicalize(program).ok()
        };
        let Some(path) = found else {
            walk.note(format!("{} (not found)", program.display()));
            continue;
        };
        for dir in python_extension_dirs(program, &path) {
            modules.extend(extension_modules(&dir));
        }
        walk.enqueue(Pending {
            path,
            listed: true,
            depth: 0,
            inherited_rpath: Vec::new(),
        });
    }
    // The programs first, then their extension modules.
    for module in modules {
        walk.enqueue(Pending {
            path: module,
            listed: false,
            depth: 0,
            inherited_rpath: Vec::new(),
        });
    }
    let mut limit_reported = false;
    while let Some(item) = walk.queue.pop_front() {
        if !std::fs::metadata(&item.path).is_ok_and(|m| m.is_file()) {
            if item.listed {
                walk.note(format!("{} (not a regular file)", item.path.display()));
            }
            continue;
        }
        if item.listed && !walk.listed.contains(&item.path) {
            if walk.closure.executables.len() >= MAX_FILES {
                if !limit_reported {
                    limit_reported = true;
                    walk.note(format!(
                        "more than {MAX_FILES} files: {} and what follows not listed",
                        item.path.display()
                    ));
                }
                continue;
            }
            walk.listed.insert(item.path.clone());
            walk.closure.executables.push(item.path.clone());
        }
        if !walk.followed.insert(item.path.clone()) {
            continue;
        }
        let Some(mut file) = open_regular(&item.path) else {
            continue;
        };
        let Ok(length) = file.metadata().map(|m| m.len()) else {
            continue;
        };
        let mut head = [0u8; SHEBANG_BYTES];
        let Ok(read) = read_head(&mut file, &mut head) else {
            continue;
        };
        let head = &head[..read];
        if head.starts_with(b"#!") {
            if item.depth >= MAX_SCRIPT_DEPTH {
                walk.note(format!(
                    "{} (script interpreters nested deeper than {MAX_SCRIPT_DEPTH})",
                    item.path.display()
                ));
                continue;
            }
            for interpreter in script_interpreters(head, path_var, &item.path, &mut walk) {
                walk.enqueue(Pending {
                    path: interpreter,
                    listed: true,
                    depth: item.depth + 1,
                    inherited_rpath: Vec::new(),
                });
            }
            continue;
        }
        if !head.starts_with(&elf::ELFMAG) {
            continue;
        }
        if length > MAX_FILE_BYTES {
            walk.note(format!(
                "{} (larger than {} MiB: its libraries not followed)",
                item.path.display(),
                MAX_FILE_BYTES >> 20
            ));
            continue;
        }
        let Some((kind, needs)) = parse_elf(file) else {
            continue;
        };
        if let Some(interpreter) = &needs.interpreter {
            match std::fs::canonicalize(interpreter) {
                Ok(path) => walk.enqueue(Pending {
                    path,
                    listed: true,
                    depth: item.depth,
                    inherited_rpath: Vec::new(),
                }),
                Err(_) => walk.note(format!(
                    "{} (interpreter of {})",
                    interpreter.display(),
                    item.path.display()
                )),
            }
        }
        let origin = item.path.parent().unwrap_or(Path::new("/"));
        let expand = |list: &[String]| -> Vec<PathBuf> {
            list.iter()
                .flat_map(|entry| entry.split(':'))
                .filter(|dir| !dir.is_empty())
                .flat_map(|dir| expand_tokens(dir, origin))
                .take(MAX_OBJECT_PATHS)
                .collect()
        };
        let runpath = expand(&needs.runpath);
        // DT_RPATH counts only without DT_RUNPATH; an object's own comes before its loaders'.
        let rpath: Vec<PathBuf> = if needs.runpath.is_empty() {
            let mut own = expand(&needs.rpath);
            own.extend(item.inherited_rpath.iter().cloned());
            own.truncate(MAX_OBJECT_PATHS);
            own
        } else {
            Vec::new()
        };
        let mut names: HashSet<&str> = HashSet::new();
        for name in &needs.needed {
            if !names.insert(name) {
                continue;
            }
            if walk.probes >= MAX_PROBES {
                walk.note(format!(
                    "more than {MAX_PROBES} library paths examined: {name} (needed by {}) and \
                     what follows not looked for",
                    item.path.display()
                ));
                break;
            }
            let found = resolve_library(name, kind, &rpath, &runpath, &system_dirs, &mut walk);
            if found.is_empty() {
                walk.note(format!("{name} (needed by {})", item.path.display()));
            }
            for path in found {
                walk.enqueue(Pending {
                    path,
                    listed: true,
                    depth: item.depth,
                    inherited_rpath: rpath.clone(),
                });
            }
        }
    }
    if walk.notes_left_off > 0 {
        let more = walk.notes_left_off;
        walk.closure.unresolved.push(format!("… and {more} more"));
    }
    walk.closure
}

/// The existing directories `program`, a known interpreter, reads at run time, and the
/// system data directories every program may read: see the module doc. Never executes it.
pub fn interpreter_runtime(program: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let canonical = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let name = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let given = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = canonical
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/usr"));
    let kind = interpreter_kind(&name).or_else(|| interpreter_kind(&given));
    match kind {
        Some(Interpreter::Python) => dirs.extend(python_dirs(program, &canonical, &name)),
        Some(Interpreter::Node) => {
            dirs.extend(
                [
                    "/usr/lib/node_modules",
                    "/usr/share/nodejs",
                    "/usr/local/lib/node_modules",
                ]
                .map(PathBuf::from),
            );
            dirs.extend(
                MULTIARCH
                    .iter()
                    .map(|m| Path::new("/usr/lib").join(m).join("nodejs")),
            );
            dirs.push(prefix.join("lib/node_modules"));
        }
        Some(Interpreter::Perl) => {
            for base in ["/usr/share", "/usr/local/share"] {
                dirs.extend(matching_children(Path::new(base), "perl"));
            }
            for lib in ["/usr/lib", "/usr/local/lib"] {
                for arch in MULTIARCH {
                    dirs.extend(matching_children(&Path::new(lib).join(arch), "perl"));
                }
            }
            dirs.push(prefix.join("lib/perl5"));
            dirs.push(PathBuf::from("/etc/perl"));
        }
        Some(Interpreter::Ruby) => {
            dirs.push(PathBuf::from("/usr/lib/ruby"));
            dirs.extend(
                MULTIARCH
                    .iter()
                    .map(|m| Path::new("/usr/lib").join(m).join("ruby")),
            );
            dirs.extend(
                [
                    "/usr/share/rubygems-integration",
                    "/var/lib/gems",
                    "/usr/local/lib/site_ruby",
                ]
                .map(PathBuf::from),
            );
            dirs.push(prefix.join("lib/ruby"));
        }
        None => {}
    }
    dirs.extend(
        [
            "/usr/share/zoneinfo",
            "/usr/lib/locale",
            "/usr/share/locale",
            "/usr/lib64/gconv",
        ]
        .map(PathBuf::from),
    );
    dirs.extend(
        MULTIARCH
            .iter()
            .map(|m| Path::new("/usr/lib").join(m).join("gconv")),
    );
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        if let Ok(dir) = std::fs::canonicalize(&dir)
            && dir.is_dir()
            && !out.contains(&dir)
        {
            out.push(dir);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interpreter {
    Python,
    Node,
    Perl,
    Ruby,
}

/// The interpreter a program's file name names, if a known one.
fn interpreter_kind(name: &str) -> Option<Interpreter> {
    // `python3.11`, `perl5.36.0`, `ruby3.1`: a name then digits and dots.
    let versioned = |stem: &str| {
        name.strip_prefix(stem).is_some_and(|rest| {
            rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        })
    };
    if versioned("python") {
        Some(Interpreter::Python)
    } else if name == "node" || name == "nodejs" {
        Some(Interpreter::Node)
    } else if versioned("perl") {
        Some(Interpreter::Perl)
    } else if versioned("ruby") {
        Some(Interpreter::Ruby)
    } else {
        None
    }
}

/// A Python interpreter's stdlib, site directories and virtualenv.
fn python_dirs(program: &Path, canonical: &Path, name: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let prefix = canonical
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/usr"));
    let mut versions: Vec<String> = Vec::new();
    if let Some(version) = name.strip_prefix("python")
        && version.contains('.')
    {
        versions.push(format!("python{version}"));
    }
    // The virtualenv: `pyvenv.cfg` beside the program as named, or one level up.
    let as_named = absolute(program);
    let venv = as_named.parent().and_then(|bin| {
        [bin.to_path_buf(), bin.parent()?.to_path_buf()]
            .into_iter()
            .find(|dir| dir.join("pyvenv.cfg").is_file())
    });
    let mut homes: Vec<PathBuf> = vec![prefix.to_path_buf()];
    if let Some(venv) = venv {
        dirs.push(venv.clone());
        let config = read_small(&venv.join("pyvenv.cfg"), 64 << 10).unwrap_or_default();
        for line in String::from_utf8_lossy(&config).lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                // `home` is the directory of the base interpreter (its `bin`).
                "home" => {
                    if let Some(base) = Path::new(value).parent() {
                        homes.push(base.to_path_buf());
                    }
                }
                "version" | "version_info" => {
                    let mut parts = value.split('.');
                    if let (Some(major), Some(minor)) = (parts.next(), parts.next())
                        && !major.is_empty()
                        && major
                            .bytes()
                            .chain(minor.bytes())
                            .all(|b| b.is_ascii_digit())
                    {
                        versions.push(format!("python{major}.{minor}"));
                    }
                }
                _ => {}
            }
        }
    }
    if versions.is_empty() {
        for home in &homes {
            for lib in ["lib", "lib64"] {
                for dir in matching_children(&home.join(lib), "python3.") {
                    if let Some(name) = dir.file_name() {
                        versions.push(name.to_string_lossy().into_owned());
                    }
                }
            }
        }
    }
    for version in &versions {
        for home in &homes {
            dirs.push(home.join("lib").join(version));
            dirs.push(home.join("lib64").join(version));
        }
        dirs.push(Path::new("/usr/lib").join(version));
        dirs.push(Path::new("/usr/local/lib").join(version));
        dirs.push(Path::new("/etc").join(version));
    }
    dirs.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    dirs
}

/// The `lib-dynload` directories of `program` when it is a Python interpreter.
fn python_extension_dirs(program: &Path, canonical: &Path) -> Vec<PathBuf> {
    let name = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if interpreter_kind(&name) != Some(Interpreter::Python) {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in python_dirs(program, canonical, &name) {
        let dynload = dir.join("lib-dynload");
        if let Ok(dynload) = std::fs::canonicalize(&dynload)
            && dynload.is_dir()
            && !dirs.contains(&dynload)
        {
            dirs.push(dynload);
        }
    }
    dirs
}

/// The shared objects (`*.so`) directly in `dir`, sorted, at most [`MAX_FILES`].
fn extension_modules(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut modules: Vec<PathBuf> = entries
        .take(MAX_FILES * 4)
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "so"))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    modules.sort();
    modules.truncate(MAX_FILES);
    modules
}

/// The existing children of `dir` whose name starts with `prefix`, sorted.
fn matching_children(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .take(4096)
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// `path` made absolute against the working directory, without resolving symlinks.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Opens `path` only if it is a regular file, never blocking (a FIFO is refused).
fn open_regular(path: &Path) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// Reads up to `buf.len()` bytes from the start of `file`.
fn read_head(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The first `limit` bytes of a regular file.
fn read_small(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The first executable regular file named `name` in `path_var`'s absolute directories,
/// canonical.
fn lookup_in_path(name: &str, path_var: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    path_var
        .split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|found| std::fs::canonicalize(found).ok())
}

/// The interpreters a `#!` line asks for: its interpreter, and for `env NAME`, `NAME` too.
fn script_interpreters(
    head: &[u8],
    path_var: &str,
    script: &Path,
    walk: &mut Walk,
) -> Vec<PathBuf> {
    let line = &head[2..];
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let mut words = line.split([' ', '\t']).filter(|w| !w.is_empty());
    let Some(interpreter) = words.next() else {
        walk.note(format!("{} (empty #! line)", script.display()));
        return Vec::new();
    };
    let mut found = Vec::new();
    let Ok(interpreter) = std::fs::canonicalize(interpreter) else {
        walk.note(format!(
            "{interpreter} (interpreter of {})",
            script.display()
        ));
        return found;
    };
    let is_env = interpreter.file_name().is_some_and(|n| n == "env");
    found.push(interpreter);
    if is_env {
        // `env [-S] [-i] [NAME=VALUE]… PROGRAM`: the first word that is neither an option nor
        // an assignment.
        if let Some(program) = words.find(|w| !w.starts_with('-') && !w.contains('=')) {
            let resolved = if program.contains('/') {
                std::fs::canonicalize(program).ok()
            } else {
                lookup_in_path(program, path_var)
            };
            match resolved {
                Some(path) => found.push(path),
                None => walk.note(format!(
                    "{program} (run by env for {}, not found in PATH)",
                    script.display()
                )),
            }
        }
    }
    found
}

/// Reads what the loader needs from an ELF file: lazily, each part bounded. `None` when it is
/// malformed (then it is not followed).
fn parse_elf(file: File) -> Option<(ElfKind, ElfNeeds)> {
    let cache = ReadCache::new(file);
    let data = &cache;
    let ident = data.read_bytes_at(0, 16).ok()?;
    match ident[EI_CLASS] {
        elf::ELFCLASS64 => parse_elf_as::<elf::FileHeader64<Endianness>>(data),
        elf::ELFCLASS32 => parse_elf_as::<elf::FileHeader32<Endianness>>(data),
        _ => None,
    }
}

fn parse_elf_as<Elf>(data: &ReadCache<File>) -> Option<(ElfKind, ElfNeeds)>
where
    Elf: FileHeader<Endian = Endianness>,
{
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let kind = ElfKind {
        is_64: header.is_class_64(),
        big_endian: header.is_big_endian(),
        machine: header.e_machine(endian),
    };
    let segments = header.program_headers(endian, data).ok()?;
    let mut needs = ElfNeeds::default();
    let mut dynamic: Option<&[Elf::Dyn]> = None;
    for segment in segments {
        let (_, size) = segment.file_range(endian);
        match segment.p_type(endian) {
            elf::PT_INTERP if size <= MAX_INTERP_BYTES => {
                if let Ok(Some(path)) = segment.interpreter(endian, data)
                    && !path.is_empty()
                {
                    needs.interpreter = Some(PathBuf::from(String::from_utf8_lossy(path).as_ref()));
                }
            }
            elf::PT_DYNAMIC if size <= MAX_DYNAMIC_BYTES && dynamic.is_none() => {
                dynamic = segment.dynamic(endian, data).ok().flatten();
            }
            _ => {}
        }
    }
    let Some(dynamic) = dynamic else {
        return Some((kind, needs)); // static: nothing to load
    };
    let mut strtab: Option<u64> = None;
    let mut strsz: Option<u64> = None;
    for entry in dynamic {
        match entry.tag(endian) {
            elf::DT_NULL => break,
            elf::DT_STRTAB => strtab = Some(entry.val(endian)),
            elf::DT_STRSZ => strsz = Some(entry.val(endian)),
            _ => {}
        }
    }
    // DT_STRTAB is an address: find the loaded segment holding it.
    let (Some(address), Some(strsz)) = (strtab, strsz) else {
        return Some((kind, needs));
    };
    let Some(strtab) = segments.iter().find_map(|segment| {
        if segment.p_type(endian) != elf::PT_LOAD {
            return None;
        }
        let vaddr: u64 = segment.p_vaddr(endian).into();
        let (offset, size) = segment.file_range(endian);
        let within = address.checked_sub(vaddr)?;
        (within < size).then(|| offset.checked_add(within))?
    }) else {
        return Some((kind, needs));
    };
    let string = |value: u64| -> Option<String> {
        if value >= strsz {
            return None;
        }
        let start = strtab.checked_add(value)?;
        let end = strtab
            .checked_add(strsz)?
            .min(start.checked_add(MAX_STRING_BYTES)?);
        let bytes = data.read_bytes_at_until(start..end, 0).ok()?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    for entry in dynamic {
        let tag = entry.tag(endian);
        if tag == elf::DT_NULL {
            break;
        }
        let target = match tag {
            elf::DT_NEEDED if needs.needed.len() < MAX_NEEDED => &mut needs.needed,
            elf::DT_RPATH if needs.rpath.len() < MAX_OBJECT_PATHS => &mut needs.rpath,
            elf::DT_RUNPATH if needs.runpath.len() < MAX_OBJECT_PATHS => &mut needs.runpath,
            _ => continue,
        };
        if let Some(value) = string(entry.val(endian))
            && !value.is_empty()
        {
            target.push(value);
        }
    }
    Some((kind, needs))
}

/// `$ORIGIN`, `$LIB` and `$PLATFORM` (and their `${…}` forms) in a search directory: the
/// directories it stands for, absolute only.
fn expand_tokens(dir: &str, origin: &Path) -> Vec<PathBuf> {
    let origin = origin.to_string_lossy();
    let platform = std::env::consts::ARCH;
    let mut expanded = vec![dir.to_string()];
    let libs = [
        "lib64",
        "lib",
        "lib/x86_64-linux-gnu",
        "lib/aarch64-linux-gnu",
    ];
    for (token, values) in [
        ("ORIGIN", vec![origin.as_ref()]),
        ("PLATFORM", vec![platform]),
        ("LIB", libs.to_vec()),
    ] {
        expanded = expanded
            .into_iter()
            .flat_map(|d| {
                values
                    .iter()
                    .map(|v| {
                        d.replace(&format!("${{{token}}}"), v)
                            .replace(&format!("${token}"), v)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        expanded.dedup();
    }
    expanded
        .into_iter()
        .filter(|d| d.starts_with('/') && !d.contains('$'))
        .map(|d| normalize(Path::new(&d)))
        .collect()
}

/// `..` and `.` removed lexically (a `$ORIGIN/../lib` the loader resolves the same way, on the
/// canonical origin).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            _ => {}
        }
    }
    out
}

/// The canonical files a `DT_NEEDED` name resolves to: see the module doc for the order. Each
/// candidate examined counts against [`MAX_PROBES`]; the system directories' answer is kept
/// per name and kind.
fn resolve_library(
    name: &str,
    kind: ElfKind,
    rpath: &[PathBuf],
    runpath: &[PathBuf],
    system_dirs: &[PathBuf],
    walk: &mut Walk,
) -> Vec<PathBuf> {
    if name.contains('/') {
        // A path: used as it is when absolute (a relative one depends on the working
        // directory).
        walk.probes += 1;
        return if name.starts_with('/') {
            matching_library(Path::new(name), kind)
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
    }
    for dir in rpath.iter().chain(runpath) {
        walk.probes += 1;
        if let Some(found) = matching_library(&dir.join(name), kind) {
            return vec![found];
        }
    }
    let key = (name.to_string(), kind);
    if let Some(found) = walk.system.get(&key) {
        return found.clone();
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in system_dirs {
        walk.probes += 1;
        if let Some(path) = matching_library(&dir.join(name), kind)
            && !found.contains(&path)
        {
            found.push(path);
        }
    }
    walk.system.insert(key, found.clone());
    found
}

/// `path`, canonical, when it is an ELF file of `kind`.
fn matching_library(path: &Path, kind: ElfKind) -> Option<PathBuf> {
    let canonical = std::fs::canonicalize(path).ok()?;
    let mut file = open_regular(&canonical)?;
    let mut header = [0u8; 20];
    if read_head(&mut file, &mut header).ok()? < header.len() || !header.starts_with(&elf::ELFMAG) {
        return None;
    }
    let is_64 = header[EI_CLASS] == elf::ELFCLASS64;
    let big_endian = header[EI_DATA] == elf::ELFDATA2MSB;
    let machine = if big_endian {
        u16::from_be_bytes([header[18], header[19]])
    } else {
        u16::from_le_bytes([header[18], header[19]])
    };
    (ElfKind {
        is_64,
        big_endian,
        machine,
    } == kind)
        .then_some(canonical)
}

/// The system library directories, in the order searched: `/etc/ld.so.conf`'s, then the
/// trusted ones; each followed by its `glibc-hwcaps/*` subdirectories. Existing only, each
/// once (canonical).
pub fn system_library_dirs() -> Vec<PathBuf> {
    let mut listed: Vec<PathBuf> = Vec::new();
    let mut conf_files = 0;
    read_ld_so_conf(
        Path::new("/etc/ld.so.conf"),
        &mut listed,
        &mut conf_files,
        0,
    );
    for base in ["/lib", "/usr/lib"] {
        for arch in MULTIARCH {
            listed.push(Path::new(base).join(arch));
        }
    }
    for dir in ["/lib64", "/lib", "/usr/lib64", "/usr/lib", "/usr/local/lib"] {
        listed.push(PathBuf::from(dir));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in listed {
        let Ok(dir) = std::fs::canonicalize(&dir) else {
            continue;
        };
        if !dir.is_dir() || dirs.contains(&dir) {
            continue;
        }
        let hwcaps = matching_children(&dir.join("glibc-hwcaps"), "");
        dirs.push(dir);
        for sub in hwcaps {
            if let Ok(sub) = std::fs::canonicalize(sub)
                && sub.is_dir()
                && !dirs.contains(&sub)
            {
                // The loader tries the hwcaps subdirectories first; listing both is enough.
                dirs.push(sub);
            }
        }
    }
    dirs
}

/// The directories one `ld.so.conf` file lists, its `include` globs followed (bounded).
fn read_ld_so_conf(path: &Path, dirs: &mut Vec<PathBuf>, files: &mut usize, depth: usize) {
    if *files >= MAX_CONF_FILES || depth > 4 {
        return;
    }
    *files += 1;
    let Some(text) = read_small(path, 64 << 10) else {
        return;
    };
    let base = path.parent().unwrap_or(Path::new("/etc"));
    for line in String::from_utf8_lossy(&text).lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(pattern) = line.strip_prefix("include") {
            if !pattern.starts_with([' ', '\t']) {
                continue;
            }
            for pattern in pattern.split_whitespace() {
                let pattern = base.join(pattern);
                for file in glob_last(&pattern) {
                    read_ld_so_conf(&file, dirs, files, depth + 1);
                }
            }
        } else if line.starts_with("hwcap") {
            // An old directive: not a directory.
        } else {
            // `dir` or `dir=type`, separated by spaces, tabs, commas or colons.
            for dir in line
                .split([' ', '\t', ',', ':'])
                .filter(|d| d.starts_with('/'))
            {
                let dir = dir.split('=').next().unwrap_or(dir);
                dirs.push(PathBuf::from(dir));
            }
        }
    }
}

/// The files a pattern names whose last component may hold `*` (as `include` lines do),
/// sorted; the pattern itself when it has none.
fn glob_last(pattern: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy();
    if !name.contains('*') {
        return vec![pattern.to_path_buf()];
    }
    let parts: Vec<&str> = name.split('*').collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .take(4096)
        .filter_map(Result::ok)
        .filter(|e| wildcard_match(&parts, &e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    found.sort();
    found.truncate(MAX_CONF_FILES);
    found
}

/// Whether `name` matches the `*`-separated `parts` of a pattern.
fn wildcard_match(parts: &[&str], name: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return name == *first;
    }
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.ends_with(last) && !name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::time::Instant;

    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr,
    };

    /// The `PATH` shell children get.
    const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

    fn canonical(path: &str) -> PathBuf {
        std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The dynamic loader of this architecture, canonical.
    fn loader() -> PathBuf {
        if cfg!(target_arch = "aarch64") {
            canonical("/lib/ld-linux-aarch64.so.1")
        } else {
            canonical("/lib64/ld-linux-x86-64.so.2")
        }
    }

    fn libc() -> PathBuf {
        let dirs = MULTIARCH.iter().map(|m| format!("/lib/{m}/libc.so.6"));
        dirs.chain(["/lib64/libc.so.6".to_string()])
            .find_map(|p| std::fs::canonicalize(p).ok())
            .expect("a libc.so.6")
    }

    fn assert_all_exist(closure: &ExecClosure) {
        for file in &closure.executables {
            assert!(file.is_file(), "{} listed but not a file", file.display());
            assert_eq!(&canonical(&file.to_string_lossy()), file, "not canonical");
        }
        let unique: HashSet<_> = closure.executables.iter().collect();
        assert_eq!(
            unique.len(),
            closure.executables.len(),
            "a file listed twice"
        );
    }

    fn executable(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn sh_python_ls_and_node_hold_their_loader_and_libc() {
        let mut programs = vec![PathBuf::from("/bin/sh"), PathBuf::from("ls")];
        for name in ["python3", "node"] {
            match lookup_in_path(name, PATH) {
                Some(path) => programs.push(path),
                None => assert_ne!(name, "python3", "python3 is needed for these tests"),
            }
        }
        for program in &programs {
            let started = Instant::now();
            let closure = exec_closure(std::slice::from_ref(program), PATH);
            eprintln!(
                "{}: {} files in {:?}, unresolved {:?}",
                program.display(),
                closure.executables.len(),
                started.elapsed(),
                closure.unresolved
            );
            let itself = lookup_in_path(&program.to_string_lossy(), PATH)
                .unwrap_or_else(|| canonical(&program.to_string_lossy()));
            assert_eq!(closure.executables.first(), Some(&itself));
            assert!(closure.executables.contains(&loader()), "{closure:?}");
            assert!(closure.executables.contains(&libc()), "{closure:?}");
            assert_all_exist(&closure);
            assert!(closure.executables.len() <= MAX_FILES);
            // ls is not what sh needs.
            if program == Path::new("/bin/sh") {
                assert!(!closure.executables.contains(&canonical("/usr/bin/ls")));
                assert!(closure.unresolved.is_empty(), "{:?}", closure.unresolved);
            }
        }
    }

    #[test]
    fn python_brings_the_libraries_of_its_extension_modules() {
        let python = lookup_in_path("python3", PATH).expect("python3");
        let closure = exec_closure(std::slice::from_ref(&python), PATH);
        let dynload = python_extension_dirs(&python, &python);
        assert!(
            !dynload.is_empty(),
            "no lib-dynload for {}",
            python.display()
        );
        let has_module = |prefix: &str| {
            dynload
                .iter()
                .flat_map(|d| extension_modules(d))
                .any(|m| m.file_name().unwrap().to_string_lossy().starts_with(prefix))
        };
        let has_library = |prefix: &str| {
            closure
                .executables
                .iter()
                .any(|f| f.file_name().unwrap().to_string_lossy().starts_with(prefix))
        };
        if has_module("_ssl.") {
            assert!(has_library("libssl.so"), "{closure:?}");
            assert!(has_library("libcrypto.so"), "{closure:?}");
        }
        if has_module("_ctypes.") {
            assert!(has_library("libffi.so"), "{closure:?}");
        }
        // The modules themselves are read through the runtime directories, not listed.
        assert!(
            !closure
                .executables
                .iter()
                .any(|f| f.starts_with(&dynload[0]))
        );
    }

    #[test]
    fn an_env_script_pulls_in_env_python_and_their_libraries() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tool");
        executable(&script, b"#!/usr/bin/env python3\nprint('hi')\n");
        let closure = exec_closure(std::slice::from_ref(&script), PATH);
        let python = lookup_in_path("python3", PATH).unwrap();
        assert_eq!(closure.executables[0], canonical(&script.to_string_lossy()));
        assert!(closure.executables.contains(&canonical("/usr/bin/env")));
        assert!(closure.executables.contains(&python), "{closure:?}");
        assert!(closure.executables.contains(&loader()));
        assert!(closure.executables.contains(&libc()));
        assert_all_exist(&closure);

        // `env -S NAME=VALUE NAME args` finds NAME; an absent NAME is reported, not fatal.
        let split = dir.path().join("split");
        executable(&split, b"#!/usr/bin/env -S LC_ALL=C sh -eu\n");
        let closure = exec_closure(std::slice::from_ref(&split), PATH);
        assert!(closure.executables.contains(&canonical("/bin/sh")));
        let absent = dir.path().join("absent");
        executable(&absent, b"#!/usr/bin/env no-such-interpreter-here\n");
        let closure = exec_closure(std::slice::from_ref(&absent), PATH);
        assert!(
            closure
                .unresolved
                .iter()
                .any(|u| u.starts_with("no-such-interpreter-here")),
            "{:?}",
            closure.unresolved
        );
        // A direct interpreter, and one missing.
        let direct = dir.path().join("direct");
        executable(&direct, b"#!/bin/sh -e\necho\n");
        let closure = exec_closure(std::slice::from_ref(&direct), PATH);
        assert!(closure.executables.contains(&canonical("/bin/sh")));
        assert!(closure.executables.contains(&libc()));
        let missing = dir.path().join("missing");
        executable(&missing, b"#!/no/such/interpreter\n");
        let closure = exec_closure(std::slice::from_ref(&missing), PATH);
        assert_eq!(
            closure.executables,
            vec![canonical(&missing.to_string_lossy())]
        );
        assert_eq!(closure.unresolved.len(), 1, "{:?}", closure.unresolved);
    }

    #[test]
    fn scripts_nested_or_looping_stop_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let root = canonical(&dir.path().to_string_lossy());
        // s0 runs under s1, which runs under s2, … s7 under /bin/sh.
        for level in 0..8 {
            let interpreter = if level == 7 {
                "/bin/sh".to_string()
            } else {
                root.join(format!("s{}", level + 1)).display().to_string()
            };
            executable(
                &root.join(format!("s{level}")),
                format!("#!{interpreter}\n").as_bytes(),
            );
        }
        let closure = exec_closure(&[root.join("s0")], PATH);
        assert_eq!(
            closure.executables.len(),
            MAX_SCRIPT_DEPTH + 1,
            "{closure:?}"
        );
        assert!(
            closure
                .unresolved
                .iter()
                .any(|u| u.contains("nested deeper"))
        );
        // A script that names itself is listed once.
        let looping = root.join("loop");
        executable(&looping, format!("#!{}\n", looping.display()).as_bytes());
        let closure = exec_closure(std::slice::from_ref(&looping), PATH);
        assert_eq!(closure.executables, vec![looping]);
    }

    /// A little-endian ELF64 header for x86-64 (or this machine), with `phnum` program headers
    /// at offset 64.
    fn elf64_header(phnum: u16) -> Vec<u8> {
        let machine: u16 = if cfg!(target_arch = "aarch64") {
            183
        } else {
            62
        };
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(&elf::ELFMAG);
        h[4] = elf::ELFCLASS64;
        h[5] = elf::ELFDATA2LSB;
        h[6] = 1; // EV_CURRENT
        h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        h[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        h[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        h[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        h[56..58].copy_from_slice(&phnum.to_le_bytes());
        h
    }

    fn phdr(p_type: u32, offset: u64, size: u64) -> Vec<u8> {
        let mut p = vec![0u8; 56];
        p[..4].copy_from_slice(&p_type.to_le_bytes());
        p[8..16].copy_from_slice(&offset.to_le_bytes());
        p[32..40].copy_from_slice(&size.to_le_bytes());
        p[40..48].copy_from_slice(&size.to_le_bytes());
        p
    }

    #[test]
    fn malformed_and_static_binaries_need_only_themselves() {
        let dir = tempfile::tempdir().unwrap();
        let root = canonical(&dir.path().to_string_lossy());
        let mut cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated", b"\x7fELF\x02\x01\x01\x00\x00".to_vec()),
            ("empty", Vec::new()),
            ("not-elf", b"MZ\x90\x00 some other format".to_vec()),
        ];
        // Program headers past the end of the file.
        let mut past_end = elf64_header(40);
        past_end.extend_from_slice(&[0u8; 8]);
        cases.push(("phdrs-past-end", past_end));
        // A PT_DYNAMIC claiming 1 TiB, a PT_INTERP without its terminating NUL.
        let mut huge = elf64_header(2);
        huge.extend(phdr(elf::PT_DYNAMIC, 0, 1 << 40));
        huge.extend(phdr(elf::PT_INTERP, 176, 16));
        huge.extend_from_slice(b"/lib/ld-without-nul");
        cases.push(("huge-dynamic", huge));
        for (name, bytes) in cases {
            let path = root.join(name);
            executable(&path, &bytes);
            let closure = exec_closure(std::slice::from_ref(&path), PATH);
            assert_eq!(closure.executables, vec![path], "{name}");
        }
        // A PT_INTERP naming an absent loader: itself, and the loader reported.
        let mut absent = elf64_header(1);
        absent.extend(phdr(elf::PT_INTERP, 120, 17));
        absent.extend_from_slice(b"/no/such/ld.so.1\0");
        let path = root.join("absent-loader");
        executable(&path, &absent);
        let closure = exec_closure(std::slice::from_ref(&path), PATH);
        assert_eq!(closure.executables, vec![path]);
        assert!(closure.unresolved[0].starts_with("/no/such/ld.so.1 (interpreter of"));
        // A PT_INTERP naming the real loader: the loader's own closure follows.
        let ld = if cfg!(target_arch = "aarch64") {
            "/lib/ld-linux-aarch64.so.1\0"
        } else {
            "/lib64/ld-linux-x86-64.so.2\0"
        };
        let mut real = elf64_header(1);
        real.extend(phdr(elf::PT_INTERP, 120, ld.len() as u64));
        real.extend_from_slice(ld.as_bytes());
        let path = root.join("real-loader");
        executable(&path, &real);
        let closure = exec_closure(std::slice::from_ref(&path), PATH);
        assert_eq!(closure.executables, vec![path, loader()]);
        // A static binary: no interpreter, no libraries.
        if let Ok(ldconfig) = std::fs::canonicalize("/sbin/ldconfig") {
            let closure = exec_closure(std::slice::from_ref(&ldconfig), PATH);
            assert_eq!(closure.executables, vec![ldconfig]);
        }
        // A file past the size bound (sparse: no disk used) is listed, not parsed.
        let big = root.join("big");
        executable(&big, &real);
        File::options()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let closure = exec_closure(std::slice::from_ref(&big), PATH);
        assert_eq!(closure.executables, vec![big]);
        assert!(
            closure.unresolved[0].contains("larger than 8192 MiB"),
            "{closure:?}"
        );
        // A FIFO is never opened (opening one would block), nor listed.
        let fifo = root.join("fifo");
        let name = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o755) }, 0);
        let closure = exec_closure(&[fifo], PATH);
        assert!(closure.executables.is_empty());
        assert_eq!(closure.unresolved.len(), 1);
    }

    #[test]
    fn needed_entries_are_read_and_bounded() {
        // One loaded segment holding everything (address = offset), a dynamic table naming
        // libc then 2000 absent libraries.
        let count = 2000u64;
        let mut strings = b"libc.so.6\0".to_vec();
        let mut offsets = vec![0u64];
        for i in 1..count {
            offsets.push(strings.len() as u64);
            strings.extend_from_slice(format!("libmurmur-absent-{i}.so\0").as_bytes());
        }
        let dynamic_at = 64 + 2 * 56;
        let dynamic_len = (count + 3) * 16;
        let strtab_at = dynamic_at + dynamic_len;
        let total = strtab_at + strings.len() as u64;
        let mut bytes = elf64_header(2);
        bytes.extend(phdr(elf::PT_LOAD, 0, total));
        bytes.extend(phdr(elf::PT_DYNAMIC, dynamic_at, dynamic_len));
        let mut entry = |tag: i64, value: u64| {
            bytes.extend_from_slice(&tag.to_le_bytes());
            bytes.extend_from_slice(&value.to_le_bytes());
        };
        entry(elf::DT_STRTAB, strtab_at);
        entry(elf::DT_STRSZ, strings.len() as u64);
        for offset in &offsets {
            entry(elf::DT_NEEDED, *offset);
        }
        entry(elf::DT_NULL, 0);
        bytes.extend_from_slice(&strings);
        let dir = tempfile::tempdir().unwrap();
        let path = canonical(&dir.path().to_string_lossy()).join("many");
        executable(&path, &bytes);

        let started = Instant::now();
        let closure = exec_closure(std::slice::from_ref(&path), PATH);
        eprintln!("{count} DT_NEEDED: {:?}", started.elapsed());
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(closure.executables[0], path);
        assert!(closure.executables.contains(&libc()), "{closure:?}");
        // MAX_NEEDED names read: libc, then 1023 absent ones, of which MAX_NOTES are noted.
        assert_eq!(closure.unresolved.len(), MAX_NOTES + 1);
        assert!(closure.unresolved[0].starts_with("libmurmur-absent-1.so (needed by"));
        let left_off = MAX_NEEDED - 1 - MAX_NOTES;
        assert_eq!(
            closure.unresolved.last().unwrap(),
            &format!("… and {left_off} more")
        );
    }

    #[test]
    fn origin_runpath_is_followed_on_a_real_build() {
        let Some(cc) = lookup_in_path("cc", PATH) else {
            eprintln!("no C compiler: the $ORIGIN build is not tried");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let root = canonical(&dir.path().to_string_lossy());
        std::fs::create_dir_all(root.join("app/bin")).unwrap();
        std::fs::create_dir_all(root.join("app/lib")).unwrap();
        std::fs::write(
            root.join("lib.c"),
            "int murmur_answer(void) { return 42; }\n",
        )
        .unwrap();
        std::fs::write(
            root.join("main.c"),
            "int murmur_answer(void);\nint main(void) { return murmur_answer() == 42 ? 0 : 1; }\n",
        )
        .unwrap();
        let run = |args: &[&str]| {
            let status = Command::new(&cc)
                .args(args)
                .current_dir(&root)
                .status()
                .unwrap();
            assert!(status.success(), "cc {args:?}");
        };
        run(&["-shared", "-fPIC", "-o", "app/lib/libmurtest.so", "lib.c"]);
        run(&[
            "-o",
            "app/bin/prog",
            "main.c",
            "-Lapp/lib",
            "-lmurtest",
            "-Wl,-rpath,$ORIGIN/../lib",
        ]);
        let prog = root.join("app/bin/prog");
        assert!(Command::new(&prog).status().unwrap().success());
        let closure = exec_closure(std::slice::from_ref(&prog), PATH);
        assert!(
            closure
                .executables
                .contains(&root.join("app/lib/libmurtest.so")),
            "{closure:?}"
        );
        assert!(closure.executables.contains(&libc()));
        assert!(closure.unresolved.is_empty(), "{:?}", closure.unresolved);
        // Without the library the name is reported.
        std::fs::remove_file(root.join("app/lib/libmurtest.so")).unwrap();
        let closure = exec_closure(std::slice::from_ref(&prog), PATH);
        assert!(closure.unresolved[0].starts_with("libmurtest.so (needed by"));
    }

    #[test]
    fn search_paths_expand_and_ld_so_conf_includes_are_bounded() {
        let origin = Path::new("/opt/app/bin");
        assert_eq!(
            expand_tokens("$ORIGIN/../lib", origin),
            vec![PathBuf::from("/opt/app/lib")]
        );
        assert_eq!(
            expand_tokens("${ORIGIN}/plugins", origin),
            vec![PathBuf::from("/opt/app/bin/plugins")]
        );
        assert!(expand_tokens("/opt/$LIB/x", origin).contains(&PathBuf::from("/opt/lib64/x")));
        assert!(expand_tokens("/opt/$LIB/x", origin).contains(&PathBuf::from("/opt/lib/x")));
        assert!(expand_tokens("relative/dir", origin).is_empty());
        assert!(expand_tokens("$UNKNOWN/lib", origin).is_empty());

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("conf.d")).unwrap();
        std::fs::write(
            root.join("ld.so.conf"),
            "# comment\n/opt/first\ninclude conf.d/*.conf\n/opt/last=libc6\n",
        )
        .unwrap();
        std::fs::write(root.join("conf.d/b.conf"), "/opt/b1, /opt/b2\n").unwrap();
        std::fs::write(root.join("conf.d/a.conf"), "/opt/a # trailing\n").unwrap();
        std::fs::write(root.join("conf.d/skip.txt"), "/opt/never\n").unwrap();
        // Includes itself: bounded, not a loop.
        std::fs::write(root.join("conf.d/self.conf"), "include *.conf\n").unwrap();
        let mut dirs = Vec::new();
        let mut files = 0;
        read_ld_so_conf(&root.join("ld.so.conf"), &mut dirs, &mut files, 0);
        let first: Vec<&str> = dirs.iter().take(4).map(|d| d.to_str().unwrap()).collect();
        assert_eq!(first, ["/opt/first", "/opt/a", "/opt/b1", "/opt/b2"]);
        assert_eq!(dirs.last(), Some(&PathBuf::from("/opt/last")));
        assert!(!dirs.contains(&PathBuf::from("/opt/never")));
        assert!(files <= MAX_CONF_FILES);
        // This host's: its multiarch directory is searched.
        let system = system_library_dirs();
        assert!(
            system.contains(&libc().parent().unwrap().to_path_buf()),
            "{system:?}"
        );
    }

    #[test]
    fn interpreter_runtime_names_the_directories_each_interpreter_reads() {
        let data: Vec<PathBuf> = [
            "/usr/share/zoneinfo",
            "/usr/lib/locale",
            "/usr/share/locale",
        ]
        .into_iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
        // A shell needs only the system data.
        let sh = interpreter_runtime(Path::new("/bin/sh"));
        for dir in &data {
            assert!(sh.contains(dir), "{sh:?}");
        }
        assert!(
            !sh.iter().any(|d| d.to_string_lossy().contains("python")),
            "{sh:?}"
        );
        for dir in &sh {
            assert!(dir.is_dir());
        }
        // Python: the stdlib holding os.py, without running it.
        let python = lookup_in_path("python3", PATH).expect("python3");
        let dirs = interpreter_runtime(&python);
        assert!(dirs.iter().any(|d| d.join("os.py").is_file()), "{dirs:?}");
        for dir in &data {
            assert!(dirs.contains(dir));
        }
        // A virtualenv: the venv, and its home's stdlib.
        let version = python.file_name().unwrap().to_string_lossy().into_owned();
        if version.starts_with("python3.") {
            let dir = tempfile::tempdir().unwrap();
            let venv = canonical(&dir.path().to_string_lossy()).join("venv");
            std::fs::create_dir_all(venv.join("bin")).unwrap();
            std::os::unix::fs::symlink(&python, venv.join("bin/python")).unwrap();
            let home = python.parent().unwrap();
            std::fs::write(
                venv.join("pyvenv.cfg"),
                format!(
                    "home = {}\ninclude-system-site-packages = false\nversion = {}.0\n",
                    home.display(),
                    &version["python".len()..]
                ),
            )
            .unwrap();
            let dirs = interpreter_runtime(&venv.join("bin/python"));
            assert!(dirs.contains(&venv), "{dirs:?}");
            let stdlib = home.parent().unwrap().join("lib").join(&version);
            if stdlib.is_dir() {
                assert!(
                    dirs.contains(&canonical(&stdlib.to_string_lossy())),
                    "{dirs:?}"
                );
            }
        }
        // Node, where installed with its global modules.
        if let Some(node) = lookup_in_path("node", PATH)
            && Path::new("/usr/lib/node_modules").is_dir()
        {
            let dirs = interpreter_runtime(&node);
            assert!(
                dirs.contains(&canonical("/usr/lib/node_modules")),
                "{dirs:?}"
            );
        }
        // Perl, where installed.
        if let Some(perl) = lookup_in_path("perl", PATH)
            && Path::new("/usr/share/perl5").is_dir()
        {
            let dirs = interpreter_runtime(&perl);
            assert!(dirs.contains(&canonical("/usr/share/perl5")), "{dirs:?}");
        }
        assert_eq!(interpreter_kind("python3.11"), Some(Interpreter::Python));
        assert_eq!(interpreter_kind("pythonista"), None);
        assert_eq!(interpreter_kind("perl5.36.0"), Some(Interpreter::Perl));
        assert_eq!(interpreter_kind("nodejs"), Some(Interpreter::Node));
        assert_eq!(interpreter_kind("bash"), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Random bytes as a "binary", bare or behind an ELF header with random program
        /// headers: never a panic, never more than the program itself plus what it names.
        #[test]
        fn random_binaries_never_panic_and_stay_bounded(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048),
            elf_prefix in proptest::bool::ANY,
            phnum in 0u16..64,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = canonical(&dir.path().to_string_lossy()).join("bin");
            let mut contents = if elf_prefix { elf64_header(phnum) } else { Vec::new() };
            contents.extend_from_slice(&bytes);
            executable(&path, &contents);
            let closure = exec_closure(std::slice::from_ref(&path), PATH);
            proptest::prop_assert_eq!(closure.executables.first(), Some(&path));
            proptest::prop_assert!(closure.executables.len() <= MAX_FILES);
            for file in &closure.executables {
                proptest::prop_assert!(file.is_file());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// A well-formed ELF frame around random dynamic entries and strings (paths, `$ORIGIN`,
        /// out-of-range offsets): never a panic, within bounds, every listed file real.
        #[test]
        fn random_dynamic_tables_never_panic(
            entries in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        elf::DT_NEEDED, elf::DT_RPATH, elf::DT_RUNPATH, elf::DT_STRTAB,
                        elf::DT_STRSZ, elf::DT_NULL, 0x7fff_ffff,
                    ]),
                    proptest::prop_oneof![0u64..64, proptest::num::u64::ANY],
                ),
                0..48,
            ),
            strings in proptest::collection::vec(
                proptest::sample::select(vec![
                    "libc.so.6", "$ORIGIN", "$ORIGIN/../lib", "/lib64", "${LIB}", "/", "..",
                    "/etc/passwd", "libm.so.6", "", "/bin/sh", "$PLATFORM/$LIB",
                ]),
                0..16,
            ),
        ) {
            let mut blob = Vec::new();
            for string in &strings {
                blob.extend_from_slice(string.as_bytes());
                blob.push(0);
            }
            let dynamic_at = 64 + 2 * 56;
            let dynamic_len = (entries.len() as u64 + 2) * 16;
            let strtab_at = dynamic_at + dynamic_len;
            let total = strtab_at + blob.len() as u64;
            let mut bytes = elf64_header(2);
            bytes.extend(phdr(elf::PT_LOAD, 0, total));
            bytes.extend(phdr(elf::PT_DYNAMIC, dynamic_at, dynamic_len));
            let mut entry = |tag: i64, value: u64| {
                bytes.extend_from_slice(&tag.to_le_bytes());
                bytes.extend_from_slice(&value.to_le_bytes());
            };
            entry(elf::DT_STRTAB, strtab_at);
            entry(elf::DT_STRSZ, blob.len() as u64);
            for (tag, value) in &entries {
                entry(*tag, *value);
            }
            bytes.extend_from_slice(&blob);
            let dir = tempfile::tempdir().unwrap();
            let path = canonical(&dir.path().to_string_lossy()).join("bin");
            executable(&path, &bytes);
            let closure = exec_closure(std::slice::from_ref(&path), PATH);
            proptest::prop_assert_eq!(closure.executables.first(), Some(&path));
            proptest::prop_assert!(closure.executables.len() <= MAX_FILES);
            proptest::prop_assert!(closure.unresolved.len() <= MAX_NOTES + 1);
            for file in &closure.executables {
                proptest::prop_assert!(file.is_file());
            }
        }
    }

    /// The Landlock ABI of this kernel, or 0.
    fn kernel_abi() -> i64 {
        // SAFETY: the documented version query.
        unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1 as libc::c_uint,
            )
        }
        .max(0)
    }

    /// A ruleset granting `Execute` only on `closure`, read on `runtime`, the `/etc` files
    /// programs read to start, listing of directories, and read-write without `Execute` on
    /// `workdir` and `/dev/null`.
    fn ruleset(closure: &ExecClosure, runtime: &[PathBuf], workdir: &Path) -> OwnedFd {
        let abi = ABI::V5;
        let mut created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .unwrap()
            .create()
            .unwrap();
        let mut add = |path: &Path, access: landlock::BitFlags<AccessFs>| {
            let fd = PathFd::new(path).unwrap();
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(abi)
            };
            (&mut created)
                .add_rule(PathBeneath::new(fd, access))
                .unwrap();
        };
        for file in &closure.executables {
            add(file, AccessFs::Execute | AccessFs::ReadFile);
        }
        for dir in runtime {
            add(dir, AccessFs::ReadFile | AccessFs::ReadDir);
        }
        for file in [
            "/etc/ld.so.cache",
            "/etc/passwd",
            "/etc/group",
            "/etc/nsswitch.conf",
        ] {
            if Path::new(file).exists() {
                add(Path::new(file), AccessFs::ReadFile.into());
            }
        }
        add(Path::new("/"), AccessFs::ReadDir.into());
        add(workdir, AccessFs::from_all(abi) & !AccessFs::Execute);
        add(
            Path::new("/dev/null"),
            AccessFs::ReadFile | AccessFs::WriteFile,
        );
        Option::<OwnedFd>::from(created).expect("a ruleset")
    }

    /// Runs `program args` confined by `ruleset` in `workdir`: (exit code, stdout, stderr).
    fn run_confined(
        ruleset: &OwnedFd,
        workdir: &Path,
        program: &Path,
        args: &[&str],
    ) -> (Option<i32>, String, String) {
        let fd = ruleset.as_raw_fd();
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(workdir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", workdir)
            .env("LANG", "C.UTF-8");
        // SAFETY: two plain system calls on values prepared before the fork.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let output = command.output().expect("the confined child starts");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    #[test]
    fn landlock_on_the_closure_is_exactly_enough() {
        if kernel_abi() < 5 {
            eprintln!(
                "Landlock ABI {} (< 5): the proof is not run here",
                kernel_abi()
            );
            return;
        }
        let workdir = tempfile::tempdir().unwrap();
        let workdir = canonical(&workdir.path().to_string_lossy());
        std::fs::copy("/usr/bin/ls", workdir.join("ls")).unwrap();
        std::fs::set_permissions(workdir.join("ls"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let sh = PathBuf::from("/bin/sh");

        // Unconfined, `ls` and the copy run: what follows is Landlock's doing.
        for script in ["ls", "./ls"] {
            let status = Command::new(&sh)
                .args(["-c", script])
                .current_dir(&workdir)
                .output()
                .unwrap();
            assert!(status.status.success(), "{script} unconfined");
        }

        let closure = exec_closure(std::slice::from_ref(&sh), PATH);
        let rules = ruleset(&closure, &interpreter_runtime(&sh), &workdir);
        let (code, out, err) = run_confined(&rules, &workdir, &sh, &["-c", "echo ok"]);
        assert_eq!((code, out.as_str(), err.as_str()), (Some(0), "ok\n", ""));
        // Neither `ls` (not in the closure) nor a copy of it in the workdir executes.
        for script in ["ls", "./ls"] {
            let (code, out, err) = run_confined(&rules, &workdir, &sh, &["-c", script]);
            assert_eq!(code, Some(126), "{script}: {out} {err}");
            assert!(err.contains("Permission denied"), "{script}: {err}");
        }

        let python = lookup_in_path("python3", PATH).expect("python3");
        let closure = exec_closure(std::slice::from_ref(&python), PATH);
        let rules = ruleset(&closure, &interpreter_runtime(&python), &workdir);
        let (code, out, err) = run_confined(
            &rules,
            &workdir,
            &python,
            &["-c", "import json,subprocess; print(1)"],
        );
        assert_eq!((code, out.as_str()), (Some(0), "1\n"), "{err}");
        // Its extension modules load (their libraries are in the closure)…
        let (code, out, err) = run_confined(
            &rules,
            &workdir,
            &python,
            &[
                "-c",
                "import ssl, ctypes, hashlib; print(ssl.OPENSSL_VERSION[:7])",
            ],
        );
        assert_eq!((code, out.as_str()), (Some(0), "OpenSSL\n"), "{err}");
        // …but it cannot run anything else: EACCES from execve.
        let attempt = "import subprocess\n\
                       for argv in (['/usr/bin/ls'], ['./ls'], ['/bin/sh', '-c', 'true']):\n    \
                           try:\n        subprocess.run(argv)\n        print('ran', argv[0])\n    \
                           except PermissionError as e:\n        print(e.errno)\n";
        let (code, out, err) = run_confined(&rules, &workdir, &python, &["-c", attempt]);
        assert_eq!((code, out.as_str()), (Some(0), "13\n13\n13\n"), "{err}");
    }
}
