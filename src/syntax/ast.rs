//! The script as written: every node carries its byte span in the source.

pub use crate::diag::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub sessions: Vec<Session>,
    /// `on begin { ... }`'s actions (each a `printf`), in the order written.
    pub begin: Vec<Action>,
    /// `on end { ... }`'s.
    pub end: Vec<Action>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The first name or glob after `session`.
    pub func: Ident,
    /// Every name or glob of the list, `func` first (`session vfs_read, vfs_write`).
    pub funcs: Vec<Ident>,
    /// `session FILE:FUNC`: the user-space file the functions are in (an empty name for
    /// `:FUNC`, the main executable of -p or -c); `None` for kernel functions.
    pub file: Option<Ident>,
    pub predicate: Option<Expr>,
    /// `None` when the session has no block: the actions are then `{ emit }`.
    pub actions: Option<Vec<Action>>,
    pub span: Span,
    /// `span START(KEY) -> END(KEY)`: the session is a span; `func` is END's name and
    /// `predicate` END's `where`.
    pub ends: Option<SpanEnds>,
    /// `on POINT`: the session is one point's event; `func` is the point's name.
    pub on: Option<OnPoint>,
    /// `profile RATE`: the session samples every CPU; `func` is `profile`.
    pub profile: Option<ProfileRate>,
    /// `offcpu`: the session is a thread's stretch off the CPU; `func` is `offcpu`.
    pub offcpu: bool,
}

/// A profile's rate as written, with where.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRate {
    pub rate: Rate,
    pub span: Span,
}

/// How often a profile samples each CPU: `99hz`, or a period (`10ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Hertz(u64),
    /// Nanoseconds.
    Period(u64),
}

/// The point of `on POINT [where C] { actions }`: a kernel function's entry, a BTF
/// tracepoint, a USDT probe or a user function's entry (`FILE:FUNC`: the session's `file`
/// is FILE).
#[derive(Debug, Clone, PartialEq)]
pub struct OnPoint {
    pub name: Ident,
    pub tracepoint: bool,
    /// `tp:CATEGORY:NAME`: the tracepoint's category, as tracefs names it.
    pub category: Option<Ident>,
    /// `usdt:FILE:[PROVIDER:]NAME`: `name` is the probe's NAME.
    pub usdt: Option<Usdt>,
    /// `on A, B, ...`: the points after the first, in the order written.
    pub more: Vec<OnPoint>,
}

/// Where a USDT point's probe is: `usdt:FILE:NAME` or `usdt:FILE:PROVIDER:NAME`.
#[derive(Debug, Clone, PartialEq)]
pub struct Usdt {
    /// The file, as for user functions (empty: the main executable of -p or -c).
    pub file: Ident,
    pub provider: Option<Ident>,
}

/// The points of a span (`span START(KEY) [where C1], ... -> END(KEY) [where C2]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEnds {
    /// One or more starts, in the order written.
    pub starts: Vec<SpanPoint>,
    pub end: SpanPoint,
}

/// One point of a span: a kernel function's entry or a BTF tracepoint, with its key.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanPoint {
    /// The function or tracepoint name (without `tp:`).
    pub name: Ident,
    pub tracepoint: bool,
    /// A USDT probe (`name` is its NAME).
    pub usdt: Option<Usdt>,
    pub key: Expr,
    pub predicate: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `emit` alone (empty `items`) means the default fields.
    Emit {
        items: Vec<EmitItem>,
        span: Span,
    },
    Aggregate(Aggregate),
    /// `printf(FORMAT, ARGS...)`: `args[0]` is the format (the checker wants a string
    /// literal there).
    Printf {
        args: Vec<Expr>,
        span: Span,
    },
    /// `let NAME = EXPR`: NAME means EXPR's value in the rest of the block.
    Let {
        name: Ident,
        value: Expr,
    },
    /// `if COND { ... } [else { ... }]`; `else if` is an `else` block holding one `If`.
    If {
        cond: Expr,
        then: Vec<Action>,
        otherwise: Option<Vec<Action>>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmitItem {
    pub expr: Expr,
    pub alias: Option<Ident>,
}

/// An aggregation: one of `aggregate::ALL`.
pub use crate::aggregate::AggFunc;

#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub func: AggFunc,
    pub func_span: Span,
    pub arg: Option<Expr>,
    /// Arguments after the first (`lhist`'s min, max and step).
    pub more_args: Vec<Expr>,
    pub by: Vec<Expr>,
    /// Each key's `as NAME`, if given (as many as `by`).
    pub key_names: Vec<Option<Ident>>,
    /// `as NAME`, if given.
    pub name: Option<Ident>,
    /// `name` is the one `as` after a plain last key (`by comm as reads`), which could
    /// have been meant for the key.
    pub name_after_key: bool,
    /// The action as written, without `as NAME`.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int(u64),
    /// Nanoseconds.
    Duration(u64),
    Str(Vec<u8>),
    Bool(bool),
    Name(String),
    /// `$N`: the script's N-th command-line argument.
    Positional(usize),
    /// `$#`: how many command-line arguments the script has.
    PositionalCount,
    Call {
        func: Ident,
        args: Vec<Expr>,
    },
    /// `base->field` (`arrow`) or `base.field`.
    Member {
        base: Box<Expr>,
        arrow: bool,
        field: Ident,
    },
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UnOp {
    Neg,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BinOp {
    Or,
    And,
    BitOr,
    BitXor,
    BitAnd,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Shl,
    Shr,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::BitAnd => "&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    pub fn is_logic(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }
}
