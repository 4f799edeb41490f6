//! The interactive front end (`fslat repl`, or `fslat` with no program on a terminal): type
//! a session and it is checked at once; look at its C, run it for a while, change it, run
//! it again. Everything past reading input goes through the driver, as the command line's
//! runs do (`driver::compile_entry`, `driver::compile_and_run`, `driver::list_functions`).
//!
//! On a terminal input is edited with rustyline (history, completion, multi-line entry
//! while braces or parentheses are open). From a pipe or file, entries are read line by
//! line the same way, without prompts: the REPL can be scripted.

use crate::driver::{
    self, Btf, Compiled, Compiler, Error, KernelTypes, ModeChoice, Options, Traceable, signals,
};
use clap::ValueEnum;
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Editor, Helper};
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::rc::Rc;

const PROMPT: &str = "fslat> ";
/// The prompt of an entry's next line while a brace or parenthesis is open.
const MORE: &str = "  ...> ";
const KEYWORDS: &[&str] = &[
    "session", "where", "emit", "as", "by", "and", "or", "not", "true", "false",
];
const COMMANDS: &[(&str, &str, &str)] = &[
    (":help", "", "this list"),
    (":c", "", "show the C of the current script"),
    (
        ":run",
        " [DUR]",
        "compile, attach, print events until DUR (e.g. 5s) or Ctrl-C, then the summary",
    ),
    (
        ":list",
        " GLOB",
        "traceable kernel functions matching GLOB (* and ?); one name: its signature",
    ),
    (
        ":cgroups",
        "",
        "cgroups with a unit, container or pod name: path, unit, container, pod",
    ),
    (
        ":mode",
        " [MODE]",
        "show or set how sessions attach (Tab lists the modes)",
    ),
    (":clear", "", "forget the current script"),
    (":quit", "", "leave (also Ctrl-D)"),
];

/// Starts the REPL: interactive on a terminal, scripted otherwise.
pub fn run(opts: &Options) -> Result<(), Error> {
    let kernel = Rc::new(driver::load_kernel_types(opts.btf.as_ref())?);
    // `--mode fsession` on a kernel without it is an error now, not at the first `:run`.
    let mode = driver::resolve_mode(opts.mode, kernel.as_ref())?;
    let functions = Rc::new(driver::traceable(kernel.as_ref(), opts));
    let mut repl = Repl {
        kernel: Rc::clone(&kernel),
        functions: Rc::clone(&functions),
        opts: opts.clone(),
        script: None,
        compiler: None,
        failures: 0,
    };
    if std::io::stdin().is_terminal() {
        crate::stderr_line!(
            "fslat {} — mode {} ({}). Type a session (Tab completes), :help for commands, Ctrl-D to leave.",
            env!("CARGO_PKG_VERSION"),
            opts.mode.word(),
            mode.name()
        );
        interactive(&mut repl, Assist { kernel, functions })
    } else {
        scripted(&mut repl)
    }
}

/// What the REPL holds between entries.
struct Repl {
    kernel: Rc<Btf>,
    functions: Rc<Traceable>,
    /// The command line's options; `:mode` changes `mode`, `:run DUR` overrides `duration`.
    opts: Options,
    /// The last script that checked cleanly.
    script: Option<String>,
    /// Made at the first `:run` (finding clang is not needed before).
    compiler: Option<Compiler>,
    /// Entries and commands that failed, for the exit status of a scripted REPL.
    failures: usize,
}

enum Flow {
    Continue,
    Quit,
}

/// Why an entry or command failed; all but `Driver` are about using the REPL itself.
#[derive(Debug, thiserror::Error)]
enum ReplError {
    #[error(transparent)]
    Driver(#[from] Error),
    #[error(
        "there is no script yet: type a session first, e.g. `session vfs_read where latency > 1ms`"
    )]
    NoScript,
    #[error("{command}: {why}")]
    Argument { command: &'static str, why: String },
    #[error("unknown command `:{0}`; :help lists the commands")]
    UnknownCommand(String),
}

impl Repl {
    fn handle(&mut self, entry: &str) -> Flow {
        let text = entry.trim();
        if text.is_empty() || only_comments(text) {
            return Flow::Continue;
        }
        // `exit`, `quit`, `help`, `clear`: what a shell or another REPL takes; never a
        // script, so they are the commands of those names.
        let bare = matches!(text, "exit" | "quit" | "help" | "clear").then_some(text);
        let result = match text.strip_prefix(':').or(bare) {
            Some(command) => match self.command(command) {
                Ok(Flow::Quit) => return Flow::Quit,
                other => other.map(|_| ()),
            },
            None => self.enter(entry),
        };
        if let Err(e) = result {
            self.failures += 1;
            match e {
                ReplError::Driver(e) => driver::report(&e),
                e => crate::stderr_line!("fslat: error: {e}"),
            }
        }
        Flow::Continue
    }

    /// A script typed at the prompt: checked now, and kept as the current script if clean.
    fn enter(&mut self, text: &str) -> Result<(), ReplError> {
        let Compiled { program, mode, .. } = self.compile(text)?;
        let labels: Vec<String> = program
            .sessions
            .iter()
            .map(|s| match s.targets.len() {
                _ if !s.several => s.label.clone(),
                1 => format!("{}: 1 function", s.label),
                n => format!("{}: {n} functions", s.label),
            })
            .collect();
        crate::stderr_line!(
            "ok: {} ({}). :run to trace, :c for its C.",
            labels.join(", "),
            mode.of_program(&program)
        );
        self.script = Some(text.to_string());
        Ok(())
    }

    fn command(&mut self, line: &str) -> Result<Flow, ReplError> {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        match name {
            "help" | "h" => print_help()?,
            "c" => self.show_c()?,
            "run" => self.run(arg)?,
            "list" => self.list(arg)?,
            "cgroups" => driver::list_cgroups(driver::Format::Text)?,
            "mode" => self.mode(arg)?,
            "clear" => {
                self.script = None;
                crate::stderr_line!("The script is empty.");
            }
            "quit" | "q" | "exit" => return Ok(Flow::Quit),
            other => return Err(ReplError::UnknownCommand(other.to_string())),
        }
        Ok(Flow::Continue)
    }

    /// The current script, compiled for the current mode.
    fn compiled(&self) -> Result<Compiled, ReplError> {
        let text = self.script.as_deref().ok_or(ReplError::NoScript)?;
        self.compile(text)
    }

    /// `text` compiled for the current mode.
    fn compile(&self, text: &str) -> Result<Compiled, ReplError> {
        Ok(driver::compile_entry(
            "<input>",
            text,
            self.kernel.as_ref(),
            &self.functions,
            &self.opts,
        )?)
    }

    fn show_c(&self) -> Result<(), ReplError> {
        Ok(driver::write_output(None, self.compiled()?.c.as_bytes())?)
    }

    fn run(&mut self, arg: &str) -> Result<(), ReplError> {
        let duration = match arg {
            "" => self.opts.duration,
            d => Some(
                driver::parse_run_duration(d).map_err(|why| ReplError::Argument {
                    command: ":run",
                    why,
                })?,
            ),
        };
        let compiled = self.compiled()?;
        if self.compiler.is_none() {
            self.compiler = Some(driver::compiler(&self.opts)?);
        }
        let Some(compiler) = &self.compiler else {
            return Ok(());
        };
        let opts = Options {
            duration,
            ..self.opts.clone()
        };
        // Ctrl-C and SIGTERM end the run (with its summary), not the REPL.
        signals::reset();
        signals::install();
        let result = driver::compile_and_run(&compiled, compiler, &opts);
        let interrupted = signals::stop_requested();
        signals::reset();
        signals::restore_sigterm();
        match result {
            Err(Error::Interrupted) | Err(Error::Build(_)) if interrupted => {
                crate::stderr_line!("Interrupted while compiling.");
                Ok(())
            }
            other => Ok(other?),
        }
    }

    fn list(&self, glob: &str) -> Result<(), ReplError> {
        if glob.is_empty() {
            return Err(ReplError::Argument {
                command: ":list",
                why: "give a GLOB, e.g. `:list vfs_*`, or one name for its signature".into(),
            });
        }
        let mut out = std::io::stdout().lock();
        driver::list_functions(
            self.kernel.as_ref(),
            &self.functions,
            Some(glob),
            false,
            &mut out,
        )?;
        Ok(())
    }

    fn mode(&mut self, arg: &str) -> Result<(), ReplError> {
        if !arg.is_empty() {
            let wanted = ModeChoice::from_str(arg, true).map_err(|_| ReplError::Argument {
                command: ":mode",
                why: format!("`{arg}` is not a mode: use {}", mode_words().join(", ")),
            })?;
            driver::resolve_mode(wanted, self.kernel.as_ref())?;
            self.opts.mode = wanted;
        }
        let mode = driver::resolve_mode(self.opts.mode, self.kernel.as_ref())?;
        crate::stderr_line!("Mode {} ({}).", self.opts.mode.word(), mode.name());
        Ok(())
    }
}

/// Every `--mode` word, as clap spells them.
fn mode_words() -> Vec<String> {
    ModeChoice::value_variants()
        .iter()
        .filter_map(|m| m.to_possible_value())
        .map(|v| v.get_name().to_string())
        .collect()
}

fn print_help() -> Result<(), Error> {
    let mut text = String::from(
        "Type a script (one or more `session FUNC [where ...] [{ ... }]`); it is checked\n\
         at once and becomes the current script. An entry continues while a brace or a\n\
         parenthesis is open, or after a `\\` at the end of a line. Commands:\n",
    );
    for (name, args, what) in COMMANDS {
        text.push_str(&format!("  {:32} {what}\n", format!("{name}{args}")));
    }
    driver::write_output(None, text.as_bytes())
}

/// Where the history is kept: `$XDG_STATE_HOME/fslat/history`, else
/// `~/.local/state/fslat/history`.
fn history_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(base.join("fslat/history"))
}

fn interactive(repl: &mut Repl, assist: Assist) -> Result<(), Error> {
    let config = Config::builder()
        .completion_type(CompletionType::List)
        .completion_show_all_if_ambiguous(true)
        .auto_add_history(false)
        .build();
    let mut editor = Editor::with_config(config).map_err(Error::Terminal)?;
    editor.set_helper(Some(assist));
    // History is a convenience: if it cannot be read or written, say so once and go on.
    let history = history_path();
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.load_history(h);
    }
    let mut history_warned = false;
    // Ctrl-C at the prompt is a key (the terminal is raw); during a command it must not
    // end the REPL.
    signals::install();
    signals::restore_sigterm();
    loop {
        match read_entry(&mut editor) {
            Ok(entry) => {
                if !entry.trim().is_empty() {
                    let _ = editor.add_history_entry(entry.as_str());
                    if let Some(h) = &history
                        && let Err(e) = editor.append_history(h)
                        && !history_warned
                    {
                        crate::stderr_line!(
                            "fslat: note: history is not saved to {}: {e}",
                            h.display()
                        );
                        history_warned = true;
                    }
                }
                if let Flow::Quit = repl.handle(&entry) {
                    break;
                }
                signals::reset();
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(Error::Terminal(e)),
        }
    }
    Ok(())
}

/// One entry: a line, and more lines (prompted with `MORE`) while a brace or parenthesis
/// is open. Ctrl-C drops the entry being typed.
fn read_entry(
    editor: &mut Editor<Assist, rustyline::history::DefaultHistory>,
) -> rustyline::Result<String> {
    let mut entry = editor.readline(PROMPT)?;
    while !entry.trim_start().starts_with(':') && !is_complete(&entry) {
        let line = editor.readline(MORE)?;
        entry.push('\n');
        entry.push_str(&line);
    }
    Ok(entry)
}

/// Entries from a pipe or a file: the same entries and commands, no prompt, no history.
fn scripted(repl: &mut Repl) -> Result<(), Error> {
    let mut entry = String::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|source| Error::ReadScript {
            path: "<stdin>".into(),
            source,
        })?;
        entry.push_str(&line);
        if !is_complete(&entry) {
            entry.push('\n');
            continue;
        }
        let flow = repl.handle(&entry);
        entry.clear();
        if let Flow::Quit = flow {
            break;
        }
    }
    // An entry left open at the end: the checker says what is missing.
    if !entry.trim().is_empty() {
        repl.handle(&entry);
    }
    match repl.failures {
        0 => Ok(()),
        n => Err(Error::ReplFailures(n)),
    }
}

fn only_comments(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l.starts_with("//")
    })
}

/// Whether an entry is finished: no brace or parenthesis left open (outside strings and
/// comments) and no `\` at the end. Commands are always one line.
fn is_complete(text: &str) -> bool {
    if text.trim_start().starts_with(':') {
        return true;
    }
    let mut depth = 0i32;
    let mut in_string = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' | '\n' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '#' => {
                chars.by_ref().find(|&c| c == '\n');
            }
            '/' if chars.peek() == Some(&'/') => {
                chars.by_ref().find(|&c| c == '\n');
            }
            '{' | '(' => depth += 1,
            '}' | ')' => depth -= 1,
            _ => {}
        }
    }
    depth <= 0 && !text.trim_end().ends_with('\\')
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Completions for the text before the cursor: where the word being completed starts, and
/// the candidates, sorted.
fn complete(kernel: &dyn KernelTypes, functions: &Traceable, before: &str) -> (usize, Vec<String>) {
    let word_len: usize = before
        .chars()
        .rev()
        .take_while(|&c| is_ident(c))
        .map(char::len_utf8)
        .sum();
    let start = before.len() - word_len;
    let word = &before[start..];
    fn starting<'a>(word: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
        let mut v: Vec<String> = names
            .filter(|n| n.starts_with(word))
            .map(str::to_string)
            .collect();
        v.sort();
        v.dedup();
        v
    }

    if let Some(command) = before.trim_start().strip_prefix(':') {
        return match command.split_once(char::is_whitespace) {
            None => {
                let colon = before.len() - command.len() - 1;
                let typed = &before[colon..];
                let names = COMMANDS
                    .iter()
                    .map(|(n, _, _)| n.to_string())
                    .filter(|n| n.starts_with(typed))
                    .collect();
                (colon, names)
            }
            Some(("list", _)) => (start, functions.starting_with(word).to_vec()),
            Some(("mode", _)) => {
                let modes = mode_words();
                (start, starting(word, modes.iter().map(String::as_str)))
            }
            Some(_) => (start, Vec::new()),
        };
    }

    let tokens = identifiers(&before[..start]);
    if tokens.last() == Some(&"session") {
        return (start, functions.starting_with(word).to_vec());
    }
    // The function of the session being written: the last `session FUNC` before the cursor.
    let function = tokens
        .windows(2)
        .rev()
        .find(|w| w[0] == "session")
        .and_then(|w| kernel.function(w[1]));
    if before[..start].trim_end().ends_with("->") || before[..start].ends_with('.') {
        let fields = function
            .and_then(|f| member_of(kernel, &f, &before[..start]))
            .unwrap_or_default();
        return (start, starting(word, fields.iter().map(String::as_str)));
    }
    let params: Vec<String> = function
        .map(|sig| {
            let named = sig.params.iter().map(|p| p.name.clone());
            let positional = (0..sig.params.len()).map(|i| format!("arg{i}"));
            named.chain(positional).filter(|n| !n.is_empty()).collect()
        })
        .unwrap_or_default();
    let mut names: Vec<&str> = params.iter().map(String::as_str).collect();
    let fixed = KEYWORDS.iter().copied();
    for name in fixed
        .chain(driver::aggregation_names())
        .chain(driver::builtin_names())
    {
        names.push(name);
    }
    (start, starting(word, names.into_iter()))
}

/// The fields that may follow `text`, which ends with `->` or `.` after a chain from a
/// parameter of `f` (`file->f_path.`): those of the struct the chain reaches.
fn member_of(kernel: &dyn KernelTypes, f: &driver::FuncSig, text: &str) -> Option<Vec<String>> {
    use driver::KType;
    // The chain, read backwards: NAME (-> or .) NAME ... up to something else.
    let mut names = Vec::new();
    let mut rest = text;
    loop {
        rest = rest
            .strip_suffix("->")
            .or_else(|| rest.strip_suffix('.'))?
            .trim_end();
        let len: usize = rest
            .chars()
            .rev()
            .take_while(|&c| is_ident(c))
            .map(char::len_utf8)
            .sum();
        if len == 0 {
            return None;
        }
        names.push(&rest[rest.len() - len..]);
        rest = rest[..rest.len() - len].trim_end();
        if !(rest.ends_with("->") || rest.ends_with('.')) {
            break;
        }
    }
    names.reverse();
    let (base, path) = names.split_first()?;
    let param = f.params.iter().enumerate().find(|(i, p)| {
        p.name == *base || base.strip_prefix("arg") == Some(i.to_string().as_str())
    })?;
    let strip = |mut ty| {
        while let KType::Ptr { pointee, .. } = kernel.resolve(ty) {
            ty = pointee;
        }
        ty
    };
    let mut ty = strip(param.1.ty);
    for name in path {
        ty = strip(kernel.field(ty, name)?.ty);
    }
    matches!(kernel.resolve(ty), KType::Struct { .. }).then(|| kernel.field_names(ty))
}

/// The identifiers (and keywords) in `text`, in order.
fn identifiers(text: &str) -> Vec<&str> {
    text.split(|c: char| !is_ident(c))
        .filter(|t| !t.is_empty() && !t.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

/// rustyline's helper: completion and multi-line entry.
struct Assist {
    kernel: Rc<Btf>,
    functions: Rc<Traceable>,
}

impl Completer for Assist {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = line.get(..pos).unwrap_or(line);
        let (start, names) = complete(self.kernel.as_ref(), &self.functions, before);
        let pairs = names
            .into_iter()
            .map(|n| Pair {
                display: n.clone(),
                replacement: n,
            })
            .collect();
        Ok((start, pairs))
    }
}

/// An entry's lines are read one at a time (`read_entry`), each with its prompt.
impl Validator for Assist {}

impl Hinter for Assist {
    type Hint = String;
}

impl Highlighter for Assist {}

impl Helper for Assist {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Fixture;

    #[test]
    fn entries_continue_while_braces_or_parentheses_are_open() {
        let cases = [
            ("session vfs_read", true),
            ("session vfs_read {", false),
            ("session vfs_read {\n emit\n}", true),
            ("session vfs_read where (tgid == 1", false),
            ("session vfs_read where comm == \"{\"", true),
            ("session vfs_read # {", true),
            ("session vfs_read // (", true),
            ("session vfs_read \\", false),
            (":run 2", true),
            ("session vfs_read }", true),
        ];
        for (text, want) in cases {
            assert_eq!(is_complete(text), want, "{text:?}");
        }
    }

    fn names(before: &str) -> (usize, Vec<String>) {
        let k = Fixture::new();
        let t = Traceable::new(&k, Rc::new(crate::traceable::Rule::btf_only()));
        complete(&k, &t, before)
    }

    #[test]
    fn completes_function_names_after_session() {
        let (start, got) = names("session vfs_re");
        assert_eq!(start, "session ".len());
        assert_eq!(got, ["vfs_read"]);
    }

    #[test]
    fn completes_parameters_of_the_session_function_and_builtins() {
        let (_, got) = names("session vfs_read where cou");
        assert_eq!(got, ["count"]);
        let (_, got) = names("session vfs_read where la");
        assert_eq!(got, ["latency"]);
        let (_, got) = names("session vfs_read { emit fi");
        assert_eq!(got, ["file"]);
        let (_, got) = names("session vfs_read where wh");
        assert_eq!(got, ["where"]);
    }

    #[test]
    fn completes_commands_and_their_arguments() {
        let (start, got) = names(":ru");
        assert_eq!((start, got), (0, vec![":run".to_string()]));
        let (_, got) = names(":mode fe");
        assert_eq!(got, ["fentry"]);
        let (_, got) = names(":mode ");
        assert_eq!(got.len(), ModeChoice::value_variants().len(), "{got:?}");
        assert!(got.contains(&"kprobe-session".to_string()), "{got:?}");
        let (_, got) = names(":list vfs_w");
        assert_eq!(got, ["vfs_write"]);
    }

    #[test]
    fn completes_struct_fields_after_an_arrow_or_a_dot() {
        let (start, got) = names("session vfs_read where file->f_p");
        assert_eq!(start, "session vfs_read where file->".len());
        assert_eq!(got, ["f_path", "f_pos"]);
        let (_, got) = names("session vfs_read { emit file->f_inode->i_");
        assert_eq!(got, ["i_ino", "i_mode", "i_size"]);
        let (_, got) = names("session vfs_read { emit arg0->f_path.");
        assert!(got.contains(&"dentry".to_string()), "{got:?}");
        let (_, got) = names("session vfs_read { emit count->");
        assert!(got.is_empty(), "{got:?}");
    }
}
