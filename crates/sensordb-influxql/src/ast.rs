//! The typed syntax tree of InfluxQL statements, as the parser builds it and an executor reads
//! it. It follows InfluxDB 1.8's `ast.go` where that is typed enough (expressions, sources,
//! fill), and is stricter where InfluxDB leaves checks to its compiler: GROUP BY holds typed
//! dimensions (`time(interval, offset)`, tags, `*`, regexes), ORDER BY only the direction
//! (InfluxDB allows nothing but `time`). Values InfluxDB treats as "none" are normalised so that
//! equal meanings are equal trees: `LIMIT 0` is no limit, `fill(null)` is the default fill,
//! `ORDER BY time ASC` the default order.

/// A parsed query: statements separated by `;`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Query {
    pub statements: Vec<Statement>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Select(Box<SelectStatement>),
    ShowDatabases,
    ShowMeasurements(ShowMeasurements),
    ShowTagKeys(ShowTagKeys),
    ShowTagValues(ShowTagValues),
    ShowFieldKeys(ShowFieldKeys),
    ShowRetentionPolicies(ShowRetentionPolicies),
    ShowSeries(ShowSeries),
    CreateDatabase(CreateDatabase),
    DropDatabase(DropDatabase),
    DropSeries(DropSeries),
    DropMeasurement(DropMeasurement),
    Delete(Delete),
}

/// `SELECT fields [INTO target] FROM sources [WHERE] [GROUP BY] [fill()] [ORDER BY time]
/// [LIMIT] [OFFSET] [SLIMIT] [SOFFSET] [tz()]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectStatement {
    pub fields: Vec<Field>,
    pub into: Option<Target>,
    pub sources: Vec<Source>,
    pub condition: Option<Expr>,
    pub group_by: Vec<Dimension>,
    pub fill: Fill,
    pub order: SortOrder,
    /// Points per series; `LIMIT 0` is no limit, as in InfluxDB.
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    /// Series per query; `SLIMIT 0` is no limit.
    pub series_limit: Option<u64>,
    pub series_offset: Option<u64>,
    /// The `tz('...')` name as written (an IANA zone name); the executor resolves it.
    pub timezone: Option<String>,
}

/// One entry of the SELECT list.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub expr: Expr,
    pub alias: Option<String>,
}

/// `INTO [db.][rp.]measurement`, or `INTO db.rp.:MEASUREMENT` (each source's own name).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub database: Option<String>,
    pub retention_policy: Option<String>,
    /// `None` for `:MEASUREMENT`.
    pub measurement: Option<String>,
}

/// A FROM source.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Measurement(Measurement),
    Subquery(Box<SelectStatement>),
}

/// `[db.][rp.]name` or `[db.][rp.]/regex/`; `db..m` leaves the retention policy out (the
/// database's default).
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub database: Option<String>,
    pub retention_policy: Option<String>,
    pub name: MeasurementName,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MeasurementName {
    Name(String),
    Regex(Regex),
}

/// A regular expression literal, checked at parse time; the pattern as it was written inside
/// `/.../`, with `\/` already turned into `/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Regex(pub String);

impl Regex {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A signed duration in nanoseconds (a duration literal such as `10s`, or `-1h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub i64);

impl Duration {
    pub const NANOSECOND: i64 = 1;
    pub const MICROSECOND: i64 = 1_000;
    pub const MILLISECOND: i64 = 1_000_000;
    pub const SECOND: i64 = 1_000_000_000;
    pub const MINUTE: i64 = 60 * Duration::SECOND;
    pub const HOUR: i64 = 60 * Duration::MINUTE;
    pub const DAY: i64 = 24 * Duration::HOUR;
    pub const WEEK: i64 = 7 * Duration::DAY;

    pub fn nanos(self) -> i64 {
        self.0
    }
}

/// An expression: SELECT fields, WHERE conditions, function arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A field or tag name (`"f"`, `f::field`, `t::tag`); dotted segments are joined with `.`.
    VarRef(VarRef),
    /// `name(args)`; the name is lower-cased (`MEAN(x)` is `mean`). `now()` is a call.
    Call(Call),
    Binary(Box<BinaryExpr>),
    /// `-x` of a non-literal (a literal is negated in place: `-5` is `Integer(-5)`).
    Negate(Box<Expr>),
    /// `( expr )`, kept so that rendering gives back the same tree.
    Paren(Box<Expr>),
    Integer(i64),
    /// An integer literal above `i64::MAX`.
    Unsigned(u64),
    Float(f64),
    /// A single-quoted string; in time conditions, a timestamp such as `'2016-01-01T00:00:00Z'`.
    String(String),
    Bool(bool),
    Duration(Duration),
    /// Only on the right of `=~` / `!~`, as a function argument or as a whole SELECT field.
    Regex(Regex),
    /// `*`, `*::field`, `*::tag`.
    Wildcard(Option<WildcardType>),
    /// `DISTINCT name` (the call form `distinct(x)` is a [`Call`]).
    Distinct(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarRef {
    pub name: String,
    pub data_type: Option<DataType>,
}

/// The `::type` of a variable reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Float,
    Integer,
    Unsigned,
    String,
    Boolean,
    /// `::field`: any field, not a tag.
    Field,
    Tag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WildcardType {
    Field,
    Tag,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub args: Vec<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BinaryExpr {
    pub op: BinaryOp,
    pub lhs: Expr,
    pub rhs: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    EqRegex,
    NotEqRegex,
    And,
    Or,
}

impl BinaryOp {
    /// Binding strength, InfluxDB's: OR 1, AND 2, comparisons 4, `+ - | ^` 5, `* / % &` 6.
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq
            | BinaryOp::NotEq
            | BinaryOp::Lt
            | BinaryOp::LtEq
            | BinaryOp::Gt
            | BinaryOp::GtEq
            | BinaryOp::EqRegex
            | BinaryOp::NotEqRegex => 4,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::BitOr | BinaryOp::BitXor => 5,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod | BinaryOp::BitAnd => 6,
        }
    }

    /// `= != < <= > >=`: the operators that order two values.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq)
    }

    /// Comparisons and logic, which InfluxDB refuses in the SELECT list.
    pub fn is_condition(self) -> bool {
        self.precedence() <= 4
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::EqRegex => "=~",
            BinaryOp::NotEqRegex => "!~",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
        }
    }
}

/// A GROUP BY entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Dimension {
    /// `time(interval[, offset])`; the interval is positive.
    Time {
        interval: Duration,
        offset: Option<TimeOffset>,
    },
    Tag(String),
    /// `*`: every tag.
    Wildcard,
    /// Every tag whose key matches.
    Regex(Regex),
}

/// The second argument of `time()` in GROUP BY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeOffset {
    Duration(Duration),
    /// `now()`: buckets aligned on the query's now.
    Now,
}

/// What fills empty GROUP BY time buckets.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Fill {
    #[default]
    Null,
    None,
    Previous,
    Linear,
    Integer(i64),
    Float(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortOrder {
    #[default]
    Ascending,
    Descending,
}

/// `SHOW MEASUREMENTS [ON db] [WITH MEASUREMENT = m | =~ /re/] [WHERE] [ORDER BY time]
/// [LIMIT] [OFFSET]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowMeasurements {
    pub database: Option<String>,
    pub with_measurement: Option<Measurement>,
    pub condition: Option<Expr>,
    pub order: SortOrder,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// `SHOW TAG KEYS [ON db] [FROM sources] [WHERE] [ORDER BY time] [LIMIT] [OFFSET] [SLIMIT]
/// [SOFFSET]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowTagKeys {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
    pub order: SortOrder,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub series_limit: Option<u64>,
    pub series_offset: Option<u64>,
}

/// `SHOW TAG VALUES [ON db] [FROM sources] WITH KEY ... [WHERE] [ORDER BY time] [LIMIT]
/// [OFFSET]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShowTagValues {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub key: TagKeyFilter,
    pub condition: Option<Expr>,
    pub order: SortOrder,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// Which tag keys `SHOW TAG VALUES ... WITH KEY` lists the values of.
#[derive(Debug, Clone, PartialEq)]
pub enum TagKeyFilter {
    Eq(String),
    NotEq(String),
    Regex(Regex),
    NotRegex(Regex),
    In(Vec<String>),
}

/// `SHOW FIELD KEYS [ON db] [FROM sources] [ORDER BY time] [LIMIT] [OFFSET]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowFieldKeys {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub order: SortOrder,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// `SHOW RETENTION POLICIES [ON db]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowRetentionPolicies {
    pub database: Option<String>,
}

/// `SHOW SERIES [ON db] [FROM sources] [WHERE] [ORDER BY time] [LIMIT] [OFFSET]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowSeries {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
    pub order: SortOrder,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// `CREATE DATABASE name [WITH [DURATION d] [REPLICATION n] [SHARD DURATION d] [NAME rp]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateDatabase {
    pub name: String,
    /// Present when the statement has a WITH clause.
    pub retention_policy: Option<RetentionPolicySpec>,
}

/// The default retention policy a `CREATE DATABASE ... WITH` asks for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RetentionPolicySpec {
    /// `Duration(0)` is infinite (`INF`, or `0s`, as in InfluxDB).
    pub duration: Option<Duration>,
    pub replication: Option<u32>,
    pub shard_duration: Option<Duration>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropDatabase {
    pub name: String,
}

/// `DROP SERIES [FROM measurements] [WHERE]`, at least one of the two; the measurements name
/// neither database nor retention policy (the statement applies to the current database, all
/// retention policies).
#[derive(Debug, Clone, PartialEq)]
pub struct DropSeries {
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropMeasurement {
    pub name: String,
}

/// `DELETE [FROM measurements] [WHERE]`, at least one of the two; like DROP SERIES, the
/// measurements name neither database nor retention policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
}
