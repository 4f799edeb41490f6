//! Every kind of diagnostic, with its stable code (`code`, listed in docs/language.md)
//! and its one-line headline (`message`): every word fslat says about a script is here.

#[derive(Debug, Clone, PartialEq)]
pub enum DiagKind {
    Syntax {
        expected: Vec<&'static str>,
    },
    EmptyScript,
    IntegerTooLarge,
    DurationTooLarge,
    BadEscape(String),
    NulInString,
    StringLiteralTooLong {
        len: usize,
        max: usize,
    },
    TooManyStrings {
        phase: &'static str,
        bytes: u32,
        limit: u32,
    },
    UnknownFunction {
        name: String,
    },
    /// `MODULE:FUNC` of a module this kernel has but has not loaded.
    ModuleNotLoaded {
        module: String,
    },
    /// `MODULE:FUNC` of a loaded module the kernel has no BTF for.
    ModuleWithoutTypes {
        module: String,
    },
    /// `MODULE:FUNC` where no function of that module is FUNC.
    NotInModule {
        name: String,
        module: String,
    },
    UnknownName {
        name: String,
    },
    UnknownCall {
        name: String,
    },
    RetOfVoid {
        func: String,
    },
    ArgOutOfRange {
        name: String,
        count: usize,
    },
    NoSuchField {
        field: String,
        ty: String,
    },
    ArrowOnValue {
        ty: String,
    },
    DotOnPointer {
        ty: String,
    },
    NotAStruct {
        ty: String,
    },
    Bitfield {
        field: String,
    },
    Unreadable {
        ty: String,
    },
    DurationVsInteger,
    Mismatch {
        op: &'static str,
        lhs: String,
        rhs: String,
    },
    StringOperator {
        op: &'static str,
    },
    UnsignedVsNegative {
        ty: String,
    },
    /// An unsigned value against a number at or past its type's largest.
    PastTheLargest {
        ty: String,
        always: bool,
        max: u64,
    },
    UnsignedTautology {
        ty: String,
        always: bool,
    },
    StructValue {
        ty: String,
    },
    NeedsName,
    DuplicateField {
        name: String,
    },
    WrongArgCount {
        func: String,
        expected: usize,
        found: usize,
    },
    BadArgType {
        func: String,
        expected: &'static str,
        found: String,
    },
    DivisionByZero,
    TooDeep {
        limit: usize,
    },
    TooManyOperators {
        limit: usize,
    },
    ShiftOutOfRange {
        by: i128,
    },
    DurationByUnitNumber {
        by: i128,
    },
    NotCondition {
        ty: String,
    },
    StringTooLong {
        len: usize,
        cap: u32,
    },
    BadKey {
        ty: String,
    },
    TooManyKeys,
    /// `hex(x)` or `oct(x)` in a comparison or computation.
    FormattedOperand {
        func: &'static str,
    },
    EntryOfReturnValue,
    TooManyEntryValues {
        max: usize,
        bytes: usize,
    },
    MissingPositional {
        n: usize,
        given: usize,
    },
    PositionalZero,
    /// A bundle's `$n` where its value is compiled in (`by`), and `fslat build` was not
    /// given it.
    PositionalAtBuild {
        n: usize,
        by: String,
    },
    BadLhist {
        reason: String,
    },
    KeyNeedsName,
    DuplicateKey {
        name: String,
    },
    /// Two event fields that JSON would write under one name (`latency` is `latency_ns`).
    JsonNameClash {
        name: String,
        other: String,
        json: String,
    },
    StackOperand {
        name: &'static str,
    },
    /// `unit`, `pod`, ... used as a value (they are names only in user space).
    CgroupNameOperand {
        name: &'static str,
    },
    /// `cgroup == "PATH"`, `under("PATH")`: PATH names no cgroup here.
    CgroupNotFound {
        path: String,
        why: String,
    },
    BlocksTooDeep {
        limit: usize,
    },
    /// A value in `on begin`/`on end` that is not a constant or `$N`.
    UserLineValue,
    UserLineAction,
    LetShadows {
        name: String,
        what: &'static str,
    },
    /// `printf()` without a string literal first.
    PrintfNoFormat,
    FormatUnknown {
        conv: String,
    },
    FormatTrailingPercent,
    PrintfTooManyArgs {
        limit: usize,
    },
    FormatTooFewArgs {
        conversions: usize,
        given: usize,
    },
    FormatTooManyArgs {
        conversions: usize,
        given: usize,
    },
    FormatArgType {
        conv: String,
        expected: &'static str,
        found: String,
    },
    DuplicateAggName {
        name: String,
    },
    Untraceable {
        func: String,
        reason: String,
    },
    /// The script needs a kernel feature this kernel lacks.
    NeedsFeature {
        what: String,
        feature: &'static str,
        since: &'static str,
        kernel: String,
    },
    ByValueStruct {
        ty: String,
    },
    NoFunctionMatches {
        pattern: String,
    },
    TooManyFunctions {
        count: usize,
        max: usize,
    },
    /// `func == "NAME"` where the session does not trace NAME.
    NotTracedHere {
        name: String,
    },
    NotInEveryFunction {
        name: String,
        func: String,
        /// A function of the session that has it, if any.
        other: Option<String>,
    },
    OtherTypeInFunction {
        name: String,
        func: String,
        ty: String,
        first_func: String,
        first_ty: String,
    },
    /// A bpftrace probe (`kprobe:`, `tracepoint:`, `BEGIN`, ...) where a session belongs.
    ForeignProbe {
        probe: String,
    },
    /// bpftrace's `/predicate/`.
    ForeignFilter,
    ForeignPrintf {
        name: String,
    },
    ForeignVariable {
        name: String,
    },
    ForeignMap,
    ForeignIf,
    /// `comm = "bash"`.
    AssignAsComparison,
    SingleQuotes,
    FractionalDuration {
        text: String,
    },
    /// `10 ms`.
    SpaceInDuration {
        text: String,
    },
    /// `10xs`.
    UnknownUnit {
        unit: String,
    },
    /// `"abc` to the end of its line.
    UnterminatedString,
    /// A NUL byte or another control character outside a string.
    ControlCharacter {
        code: u32,
    },
    /// `-5ms`.
    NegativeDuration,
    /// A file's path written relative without `./` (`bin/app:main`).
    RelativePath {
        path: String,
    },
    /// A word close to the keyword the parser expected (`sesion`).
    UnknownKeyword {
        word: String,
    },
    /// A script whose first word is not `session`, nor close to it.
    NotASession {
        word: String,
    },
    /// `session vfs_read, libc:malloc`.
    KernelAndUserFunctions,
    /// `session libc:malloc, /usr/bin/x:main`.
    TwoUserFiles {
        first: String,
        other: String,
    },
    /// A user-space file fslat cannot trace (does not exist, not ELF, unreadable,
    /// stripped, library not found): the reason is the elf module's.
    UserFile {
        file: String,
        why: String,
    },
    /// `:FUNC` without -p or -c.
    NoMainExecutable,
    SessionOfTracepoint {
        point: String,
    },
    NoUserFunction {
        name: String,
        file: String,
    },
    NoUserFunctionMatches {
        pattern: String,
        file: String,
    },
    /// `kstack` or another kernel-only name in a user-space session.
    KernelOnlyName {
        name: String,
    },
    /// A user-space session on a machine fslat cannot read user registers of.
    UserNeedsX86,
    /// A user function's parameter that no integer argument register holds.
    NotInRegister {
        name: String,
        how: &'static str,
    },
    UnknownTracepoint {
        name: String,
    },
    SpanKeyMismatch {
        start: String,
        end: String,
    },
    SpanKeyType {
        ty: String,
    },
    SpanStartAtReturn,
    SpanStartValue {
        ty: String,
    },
    /// `start.NAME` of one type at a span's first START and another at a later one.
    SpanStartsDiffer {
        first: String,
        other: String,
    },
    EntryInSpan,
    RetInSpan,
    /// A name only a call's return has (`latency`, `ret`, `oncpu`...) at an `on` point.
    AtPointOnly {
        name: String,
    },
    EntryAtPoint,
    /// `on A, B` where a point is not a tracepoint.
    OnListNotTracepoint {
        name: String,
    },
    /// `on tp:GLOB` (or `tp:CATEGORY:GLOB`) that matches no BTF tracepoint.
    NoTracepointMatches {
        pattern: String,
    },
    TooManyTracepoints {
        count: usize,
        max: usize,
    },
    /// `tp:CATEGORY:NAME` where tracefs cannot be read.
    TracefsUnreadable {
        category: String,
    },
    /// A USDT point whose file has no SDT notes.
    NoSdtNotes {
        file: String,
    },
    /// A USDT point naming a probe its file does not have.
    UnknownUsdt {
        probe: String,
        file: String,
    },
    /// `usdt:FILE:NAME` where providers of the file each have a NAME.
    UsdtAmbiguous {
        name: String,
        providers: String,
    },
    /// A USDT probe with an argument in a form that cannot be read (a symbol's address).
    UsdtUnreadableArg {
        probe: String,
        index: usize,
        spec: String,
    },
    /// A USDT probe whose semaphore the kernel cannot count (not 2-byte aligned).
    UsdtSemaphore {
        probe: String,
        offset: u64,
    },
    SchedInSpan {
        name: String,
    },
    /// `profile 0hz`, or faster than the kernel's CPU clock samples.
    ProfileRate {
        rate: String,
    },
    /// An offcpu `where` term that joins `latency`/`runq` to the thread's names with `or`.
    OffcpuMixedWhere,
}

impl DiagKind {
    /// Its stable code, shown in the message (`error[F0401]: ...`) and listed in
    /// docs/language.md ("Error codes"). A code is never reused for another kind.
    pub fn code(&self) -> &'static str {
        use DiagKind::*;
        match self {
            Syntax { .. } => "F0101",
            EmptyScript => "F0102",
            IntegerTooLarge => "F0103",
            DurationTooLarge => "F0104",
            BadEscape(..) => "F0105",
            NulInString => "F0106",
            StringLiteralTooLong { .. } => "F0107",
            FractionalDuration { .. } => "F0108",
            UnknownKeyword { .. } => "F0109",
            NotASession { .. } => "F0110",
            AssignAsComparison => "F0111",
            SingleQuotes => "F0112",
            SpaceInDuration { .. } => "F0120",
            UnknownUnit { .. } => "F0121",
            UnterminatedString => "F0122",
            ControlCharacter { .. } => "F0123",
            NegativeDuration => "F0124",
            RelativePath { .. } => "F0125",
            ForeignProbe { .. } => "F0201",
            ForeignFilter => "F0202",
            ForeignPrintf { .. } => "F0203",
            ForeignVariable { .. } => "F0204",
            ForeignMap => "F0205",
            ForeignIf => "F0206",
            UnknownFunction { .. } => "F0301",
            Untraceable { .. } => "F0302",
            ByValueStruct { .. } => "F0303",
            NoFunctionMatches { .. } => "F0304",
            TooManyFunctions { .. } => "F0305",
            NotTracedHere { .. } => "F0306",
            NotInEveryFunction { .. } => "F0307",
            OtherTypeInFunction { .. } => "F0308",
            NeedsFeature { .. } => "F0309",
            ModuleNotLoaded { .. } => "F0310",
            ModuleWithoutTypes { .. } => "F0311",
            NotInModule { .. } => "F0312",
            UnknownName { .. } => "F0401",
            UnknownCall { .. } => "F0402",
            RetOfVoid { .. } => "F0403",
            ArgOutOfRange { .. } => "F0404",
            MissingPositional { .. } => "F0405",
            PositionalZero => "F0406",
            KernelOnlyName { .. } => "F0407",
            CgroupNotFound { .. } => "F0408",
            PositionalAtBuild { .. } => "F0409",
            NoSuchField { .. } => "F0501",
            ArrowOnValue { .. } => "F0502",
            DotOnPointer { .. } => "F0503",
            NotAStruct { .. } => "F0504",
            Bitfield { .. } => "F0505",
            Unreadable { .. } => "F0506",
            DurationVsInteger => "F0507",
            Mismatch { .. } => "F0508",
            StringOperator { .. } => "F0509",
            UnsignedVsNegative { .. } => "F0510",
            UnsignedTautology { .. } => "F0511",
            StructValue { .. } => "F0512",
            WrongArgCount { .. } => "F0513",
            BadArgType { .. } => "F0514",
            DivisionByZero => "F0515",
            TooDeep { .. } => "F0516",
            TooManyOperators { .. } => "F0517",
            ShiftOutOfRange { .. } => "F0518",
            NotCondition { .. } => "F0519",
            FormattedOperand { .. } => "F0520",
            StackOperand { .. } => "F0521",
            CgroupNameOperand { .. } => "F0522",
            EntryOfReturnValue => "F0523",
            StringTooLong { .. } => "F0524",
            PastTheLargest { .. } => "F0530",
            DurationByUnitNumber { .. } => "F0525",
            NeedsName => "F0601",
            DuplicateField { .. } => "F0602",
            BadKey { .. } => "F0603",
            TooManyKeys => "F0604",
            TooManyEntryValues { .. } => "F0605",
            BadLhist { .. } => "F0606",
            KeyNeedsName => "F0607",
            DuplicateKey { .. } => "F0608",
            JsonNameClash { .. } => "F0609",
            DuplicateAggName { .. } => "F0611",
            TooManyStrings { .. } => "F0612",
            KernelAndUserFunctions => "F0701",
            TwoUserFiles { .. } => "F0702",
            UserFile { .. } => "F0703",
            NoMainExecutable => "F0704",
            NoUserFunction { .. } => "F0705",
            NoUserFunctionMatches { .. } => "F0706",
            UserNeedsX86 => "F0707",
            NotInRegister { .. } => "F0708",
            SessionOfTracepoint { .. } => "F0709",
            UnknownTracepoint { .. } => "F0801",
            SpanKeyMismatch { .. } => "F0802",
            SpanKeyType { .. } => "F0803",
            SpanStartAtReturn => "F0804",
            SpanStartValue { .. } => "F0805",
            EntryInSpan => "F0806",
            RetInSpan => "F0807",
            SpanStartsDiffer { .. } => "F0809",
            PrintfNoFormat => "F1101",
            FormatUnknown { .. } => "F1102",
            FormatTrailingPercent => "F1103",
            PrintfTooManyArgs { .. } => "F1104",
            FormatTooFewArgs { .. } => "F1105",
            FormatTooManyArgs { .. } => "F1106",
            FormatArgType { .. } => "F1107",
            LetShadows { .. } => "F1108",
            BlocksTooDeep { .. } => "F1109",
            UserLineValue => "F1110",
            UserLineAction => "F1111",
            AtPointOnly { .. } => "F0820",
            EntryAtPoint => "F0821",
            OnListNotTracepoint { .. } => "F0822",
            NoTracepointMatches { .. } => "F0823",
            TooManyTracepoints { .. } => "F0824",
            TracefsUnreadable { .. } => "F0825",
            NoSdtNotes { .. } => "F0840",
            UnknownUsdt { .. } => "F0841",
            UsdtAmbiguous { .. } => "F0842",
            UsdtUnreadableArg { .. } => "F0843",
            UsdtSemaphore { .. } => "F0844",
            SchedInSpan { .. } => "F0808",
            ProfileRate { .. } => "F0830",
            OffcpuMixedWhere => "F0831",
        }
    }

    /// The one-line headline. Every word fslat says about a script is here.
    pub fn message(&self) -> String {
        use DiagKind::*;
        match self {
            Syntax { expected } if expected.is_empty() => "this is not valid fslat syntax".into(),
            Syntax { expected } => format!("expected {} here", one_of(expected)),
            EmptyScript => "the script has no `session`".into(),
            IntegerTooLarge => "this number does not fit in 64 bits".into(),
            DurationTooLarge => "this duration is longer than 2^64 nanoseconds".into(),
            BadEscape(e) if e.ends_with('\n') => {
                "a backslash at the end of a line is not an escape: a string stays on one line (write `\\n` for a newline)".into()
            }
            BadEscape(e) if e.chars().any(char::is_control) => format!(
                "unknown escape `{}` in a string",
                e.escape_debug()
            ),
            BadEscape(e) => format!("unknown escape `{e}` in a string"),
            NulInString => "a string cannot contain a NUL byte (`\\x00`)".into(),
            TooManyStrings {
                phase,
                bytes,
                limit,
            } => format!(
                "this session compares {bytes} bytes of distinct strings {phase} (with its keys); \
                 a BPF program has room for {limit}: compare fewer different fields"
            ),
            StringLiteralTooLong { len, max } => {
                format!("this string has {len} bytes; a string literal holds at most {max}")
            }
            UnknownFunction { name } => {
                format!("`{name}` is not a traceable kernel function (no BTF for it)")
            }
            ModuleNotLoaded { module } => format!(
                "kernel module `{module}` is not loaded: load it with `modprobe {module}` (as root), then run again"
            ),
            ModuleWithoutTypes { module } => format!(
                "kernel module `{module}` is loaded but this kernel has no BTF for it \
                 (/sys/kernel/btf/{module}; built without CONFIG_DEBUG_INFO_BTF_MODULES), \
                 so its functions cannot be traced"
            ),
            NotInModule { name, module } => {
                format!("kernel module `{module}` has no traceable function `{name}`")
            }
            UnknownName { name } => format!("unknown name `{name}`"),
            UnknownTracepoint { name } => {
                format!("`{name}` is not a BTF tracepoint of this kernel (no `btf_trace_{name}`)")
            }
            SpanKeyMismatch { start, end } => format!(
                "a span's two keys must have the same type: START's is {start}, END's is {end}"
            ),
            SpanKeyType { ty } => {
                format!("a span's key must be an integer or a pointer, not {ty}")
            }
            SpanStartAtReturn => {
                "a span's START is one point in time: `latency`, `ret`, `start.NAME` and stacks belong to END".into()
            }
            SpanStartValue { ty } => format!(
                "`start.NAME` carries integers, booleans, durations, pointers and strings, not {ty}"
            ),
            SpanStartsDiffer { first, other } => format!(
                "`start.NAME` must be one type at every START of the span: {first}, {other}"
            ),
            EntryInSpan => "`entry()` is for sessions; in a span, write `start.NAME`".into(),
            RetInSpan => "a span's points are a function's entry or a tracepoint: there is no `ret`".into(),
            AtPointOnly { name } => format!(
                "`{name}` belongs to a call, from its entry to its return: an `on` point has none"
            ),
            EntryAtPoint => "`entry()` is for sessions: `on` is one point, its values are all at hand".into(),
            OnListNotTracepoint { name } => format!(
                "`on` takes several points only as tracepoints (`tp:NAME`): `{name}` is not one"
            ),
            NoTracepointMatches { pattern } => {
                format!("no BTF tracepoint of this kernel matches `tp:{pattern}`")
            }
            TooManyTracepoints { count, max } => format!(
                "this `on` names {count} tracepoints, more than {max} (one program each)"
            ),
            TracefsUnreadable { category } => format!(
                "the category `{category}` is read from tracefs (BTF does not carry it), and no tracefs can be read here"
            ),
            NoSdtNotes { file } => {
                format!("`{file}` has no USDT probes (no `.note.stapsdt` section)")
            }
            UnknownUsdt { probe, file } => format!("`{file}` has no USDT probe `{probe}`"),
            UsdtAmbiguous { name, providers } => {
                format!("USDT probe `{name}` is in several providers of the file: {providers}")
            }
            UsdtUnreadableArg { probe, index, spec } => format!(
                "USDT probe `{probe}` cannot be attached: its argument {index} (`{spec}`) is in a form libbpf cannot read"
            ),
            UsdtSemaphore { probe, offset } => format!(
                "USDT probe `{probe}` cannot be enabled: its semaphore (file offset 0x{offset:x}) is not 2-byte aligned, and the kernel counts only aligned ones"
            ),
            SchedInSpan { name } => format!(
                "`{name}` is one thread's time: this span's ends may be different threads"
            ),
            OffcpuMixedWhere => "an offcpu `where` decides on the thread's names when it leaves the CPU and on `latency` and `runq` when it comes back: a term cannot mix them".into(),
            ProfileRate { rate } => format!(
                "a profile samples each CPU at least once and at most 100000 times a second (every 10us): `{rate}` is neither"
            ),
            UnknownCall { name } => format!("unknown function `{name}()`"),
            RetOfVoid { func } => format!("`{func}` returns void: there is no `ret`"),
            ArgOutOfRange { name, count } => {
                format!("`{name}` does not exist: the function has {count} parameter(s)")
            }
            NoSuchField { field, ty } => format!("`{ty}` has no field `{field}`"),
            ArrowOnValue { ty } => format!("`->` needs a pointer, but this is `{ty}`"),
            DotOnPointer { ty } => format!("`.` needs a struct, but this is a pointer (`{ty}`)"),
            NotAStruct { ty } => format!("`{ty}` has no fields"),
            Bitfield { field } => format!("`{field}` is a bitfield, which fslat cannot read yet"),
            Unreadable { ty } => format!("fslat cannot read a value of type `{ty}`"),
            DurationVsInteger => "a duration can only be compared with a duration".into(),
            Mismatch { op, lhs, rhs } => format!("`{op}` cannot combine {lhs} with {rhs}"),
            StringOperator { op } => {
                format!("strings can only be compared with `==` and `!=`, not `{op}`")
            }
            UnsignedVsNegative { ty } => {
                format!("this value is unsigned (`{ty}`): it is never negative")
            }
            PastTheLargest { ty, always, max } => {
                format!("this comparison is always {always}: a `{ty}` is at most {max}")
            }
            UnsignedTautology { ty, always } => {
                format!("this comparison is always {always}: the value is unsigned (`{ty}`)")
            }
            StructValue { ty } => format!("`{ty}` is a whole struct; pick one of its fields"),
            NeedsName => "this field needs a name: add `as NAME`".into(),
            DuplicateField { name } => format!("the event already has a field `{name}`"),
            WrongArgCount {
                func,
                expected,
                found,
            } => format!("`{func}()` takes {expected} argument(s), not {found}"),
            BadArgType {
                func,
                expected,
                found,
            } => format!("`{func}()` needs {expected}, not {found}"),
            DivisionByZero => "division by zero".into(),
            TooDeep { limit } => format!(
                "parentheses nest deeper than {limit} levels here; fslat accepts at most {limit}"
            ),
            TooManyOperators { limit } => format!(
                "the script has more than {limit} operators; fslat accepts at most {limit} (split a generated filter across sessions, or use -p/-c)"
            ),
            ShiftOutOfRange { by } => {
                format!("a shift by {by}: values are 64 bits wide, so shifts take 0 .. 63")
            }
            NotCondition { ty } => format!("a condition must be true or false, not {ty}"),
            DurationByUnitNumber { by } => format!(
                "a duration divided by {by} is still a duration ({by} times shorter), not a number of another unit"
            ),
            StringTooLong { len, cap } => format!(
                "this string has {len} bytes but the value compared holds at most {}: it can never match",
                cap.saturating_sub(1)
            ),
            BadKey { ty } => format!("{ty} cannot be an aggregation key"),
            TooManyKeys => "at most 4 keys may follow `by`".into(),
            FormattedOperand { func } => format!(
                "`{func}()` formats a value for output: it can be emitted or used as a `by` key, not compared, computed with or tested"
            ),
            EntryOfReturnValue => {
                "`entry()` saves a value at entry, but this is known only at return".into()
            }
            TooManyEntryValues { max, bytes } => format!(
                "a session saves at most {max} different values at entry (`entry()`, `start.NAME`), {bytes} bytes in all"
            ),
            MissingPositional { n, given } => format!(
                "`${n}` is not given: the script was run with {given} argument{}",
                if *given == 1 { "" } else { "s" }
            ),
            PositionalZero => "script arguments count from `$1`".into(),
            PositionalAtBuild { n, by } => format!(
                "`${n}` sets {by}, which a bundle compiles in, and `fslat build` was not given it"
            ),
            BadLhist { reason } => format!("lhist(): {reason}"),
            KeyNeedsName => "this key needs a name: add `as NAME`".into(),
            DuplicateKey { name } => format!("the aggregation already has a key `{name}`"),
            JsonNameClash { name, other, json } => format!(
                "`{name}` and `{other}` would both be `{json}` in JSON output (a duration's name gets `_ns`): rename one with `as NAME`"
            ),
            StackOperand { name } => format!(
                "`{name}` is a call stack: it can be emitted or used as a `by` key, not compared, computed with or tested"
            ),
            CgroupNameOperand { name } => format!(
                "`{name}` is a cgroup's name, known only outside the kernel: it can be emitted or used as a `by` key, not compared, computed with or tested"
            ),
            CgroupNotFound { path, why } => format!("no cgroup `{path}`: {why}"),
            UserLineAction => "`on begin` and `on end` hold `printf`s only: they run once, in fslat, not per call".into(),
            UserLineValue => "`on begin` and `on end` run in fslat, not in the kernel: they print constants and `$1`.. only".into(),
            BlocksTooDeep { limit } => format!(
                "blocks nest deeper than {limit} levels here (a session's block and the `if`s in it); fslat accepts at most {limit}"
            ),
            LetShadows { name, what } => format!(
                "`let {name}` would hide {what} of that name: choose another name"
            ),
            PrintfNoFormat => {
                "`printf` takes a format first: a string literal (`printf(\"%s %d\\n\", comm, pid)`)"
                    .into()
            }
            FormatUnknown { conv } => format!(
                "`{conv}` is not a conversion fslat's printf knows (`%d %i %u %x %X %o %s %c %p %%`, with flags `-0+ #`, a width, `.PRECISION` and `l`/`ll`/`h`/`z`/`j`)"
            ),
            FormatTrailingPercent => {
                "the format ends in the middle of a conversion (write `%%` for a `%` sign)".into()
            }
            PrintfTooManyArgs { limit } => {
                format!("`printf` takes at most {limit} arguments after its format")
            }
            FormatTooFewArgs { conversions, given } => format!(
                "the format has {conversions} conversion{} but {given} argument{} follow{} it: this one has none",
                plural(*conversions),
                plural(*given),
                if *given == 1 { "s" } else { "" }
            ),
            FormatTooManyArgs { conversions, given } => format!(
                "the format has {conversions} conversion{} but {given} argument{} follow{} it: this one is not printed",
                plural(*conversions),
                plural(*given),
                if *given == 1 { "s" } else { "" }
            ),
            FormatArgType {
                conv,
                expected,
                found,
            } => format!("`{conv}` prints {expected}; this is {found}"),
            DuplicateAggName { name } => {
                format!("another aggregation of this program is already named `{name}`")
            }
            Untraceable { func, reason } => {
                format!("`{func}` cannot be traced with fentry/fexit or fsession: {reason}")
            }
            NeedsFeature {
                what,
                feature,
                since,
                kernel,
            } => format!(
                "{what} needs {feature}, which Linux {since} brought; {kernel} does not have it"
            ),
            ByValueStruct { ty } => {
                format!(
                    "this parameter is a struct passed by value (`{ty}`); fslat reads fields through pointers only"
                )
            }
            NoFunctionMatches { pattern } => {
                format!("no traceable kernel function matches `{pattern}`")
            }
            TooManyFunctions { count, max } => {
                format!("this session matches {count} functions, more than --max-functions ({max})")
            }
            NotTracedHere { name } => format!(
                "`func` is never `{name}`: this session traces no function of that name"
            ),
            NotInEveryFunction { name, func, other } => match other {
                Some(o) => format!(
                    "`{name}` is not a parameter of every function of this session: `{o}` has it, `{func}` does not"
                ),
                None => format!(
                    "`{name}` is not a parameter of `{func}` (nor of the session's other functions)"
                ),
            },
            OtherTypeInFunction {
                name,
                func,
                ty,
                first_func,
                first_ty,
            } => format!(
                "`{name}` has another type in `{func}` (`{ty}`) than in `{first_func}` (`{first_ty}`)"
            ),
            ForeignProbe { probe } => match probe.as_str() {
                "kprobe" | "k" | "fentry" | "f" | "kfunc" => format!(
                    "fslat has no `{probe}:` probes: `on FUNC` acts at a kernel function's entry, `session FUNC` at its entry and return together"
                ),
                "kretprobe" | "kr" | "fexit" | "fr" | "kretfunc" => format!(
                    "fslat has no `{probe}:` probes: `session FUNC` sees the return too (`ret` is bpftrace's `retval`, `latency` the time since entry)"
                ),
                "tracepoint" | "t" | "rawtracepoint" | "rt" => format!(
                    "fslat has no `{probe}:` probes: `on tp:NAME` acts at a BTF tracepoint"
                ),
                "BEGIN" | "END" => format!(
                    "fslat has no `{probe}` probe: fslat's are `on begin` and `on end`"
                ),
                "uprobe" | "u" => format!(
                    "fslat has no `{probe}:` probes: `on FILE:FUNC` acts at a user-space function's entry, `session FILE:FUNC` at its entry and return together"
                ),
                "uretprobe" | "ur" => format!(
                    "fslat has no `{probe}:` probes: `session FILE:FUNC` sees a user-space function's return too (`ret`, and `latency` since entry)"
                ),
                "profile" | "p" => format!(
                    "fslat has no `{probe}:` probes: `profile RATEhz` samples the CPUs"
                ),
                "usdt" | "U" => format!(
                    "fslat has no `{probe}:` probes: `on usdt:FILE:NAME` acts at a USDT probe"
                ),
                _ => format!(
                    "fslat has no `{probe}:` probes: it traces functions, tracepoints and USDT points, and samples the CPUs"
                ),
            },
            ForeignFilter => {
                "a filter is written `where CONDITION` in fslat, not between slashes".into()
            }
            ForeignPrintf { name } => format!("fslat has no `{name}()`"),
            ForeignVariable { name } => format!(
                "fslat's variables are `let` names, without `$` (`${name}`)"
            ),
            ForeignMap => {
                "fslat has no maps (`@...`): an aggregation is an action of its own, with its keys after `by`".into()
            }
            ForeignIf => "this is not an `if` fslat can read".into(),
            AssignAsComparison => "`=` is not a comparison: fslat compares with `==`".into(),
            SingleQuotes => "strings are written in double quotes".into(),
            FractionalDuration { text } => {
                format!("`{text}`: a duration is a whole number of ns, us, ms or s")
            }
            SpaceInDuration { text } => {
                format!("`{text}`: a duration is written without a space before its unit")
            }
            UnknownUnit { unit } => {
                format!("`{unit}` is not a unit of duration: write ns, us, ms or s")
            }
            UnterminatedString => "this string has no closing `\"` on its line".into(),
            ControlCharacter { code: 0 } => "the script holds a NUL byte here".into(),
            ControlCharacter { code } => {
                format!("the script holds a control character (U+{code:04X}) here")
            }
            NegativeDuration => "a duration cannot be negative".into(),
            RelativePath { path } => format!(
                "`{path}` is read as a path only when it is absolute or starts with `./` or `../`"
            ),
            UnknownKeyword { word } => format!("`{word}` is not a keyword or action fslat knows"),
            NotASession { word } => {
                format!("a script is made of `session FUNC` items; `{word}` does not start one")
            }
            KernelAndUserFunctions => {
                "a session traces kernel functions or user-space functions, not both".into()
            }
            TwoUserFiles { first, other } => format!(
                "a session's user-space functions are in one file, but this one names `{}` after `{}`",
                shown_file(other),
                shown_file(first)
            ),
            UserFile { file, why } => format!("cannot trace `{}`: {why}", shown_file(file)),
            SessionOfTracepoint { point } => format!(
                "`{point}` is a tracepoint: a session is a function's call, from entry to return, and a tracepoint has no return"
            ),
            NoMainExecutable => {
                "`:FUNC` is a function of the traced program, but there is none: give -p PID or -c CMD, or write FILE:FUNC".into()
            }
            NoUserFunction { name, file } => {
                format!("`{file}` has no function `{name}` in its symbol tables")
            }
            NoUserFunctionMatches { pattern, file } => {
                format!("no function of `{file}` matches `{pattern}`")
            }
            KernelOnlyName { name } => format!(
                "`{name}` is a kernel name: a user-space session has no kernel context to read it from"
            ),
            NotInRegister { name, how } => format!(
                "`{name}` is passed {how}, not in an integer argument register: fslat reads a user function's parameters from those"
            ),
            UserNeedsX86 => {
                "user-space functions are traced on x86-64 only (fslat reads their arguments from its registers)".into()
            }
        }
    }
}

/// A user file as the script wrote it (`:FUNC` has none).
fn shown_file(file: &str) -> &str {
    if file.is_empty() {
        "the traced program"
    } else {
        file
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn one_of(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

#[cfg(test)]
mod tests {
    /// The codes `code` gives, in its order.
    fn codes() -> Vec<&'static str> {
        let source = include_str!("kinds.rs");
        let body = source
            .split("pub fn code(&self)")
            .nth(1)
            .and_then(|s| s.split("\n    }\n").next())
            .expect("kinds.rs has `code`");
        body.split('"')
            .filter(|w| w.len() == 5 && w.starts_with('F'))
            .collect()
    }

    #[test]
    fn every_kind_has_its_own_code() {
        let codes = codes();
        assert!(codes.len() > 70, "{codes:?}");
        let mut seen = std::collections::HashSet::new();
        for c in &codes {
            assert!(c[1..].bytes().all(|b| b.is_ascii_digit()), "{c}");
            assert!(seen.insert(c), "{c} twice");
        }
    }

    #[test]
    fn docs_list_every_code() {
        let docs = include_str!("../../docs/language.md");
        let listed: Vec<&str> = docs
            .lines()
            .filter_map(|l| l.strip_prefix("| `F"))
            .filter_map(|l| l.get(..4))
            .collect();
        let codes: Vec<String> = codes().iter().map(|c| c[1..].to_string()).collect();
        assert_eq!(listed, codes);
    }
}
