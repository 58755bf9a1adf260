//! InfluxQL's reserved words (InfluxDB 1.8's `token.go`): a bare identifier spelled like one,
//! in any case, is the keyword, and must be double-quoted to be used as a name.

/// InfluxQL's reserved words (InfluxDB 1.8's `token.go`): a bare identifier spelled like one
/// of these, in any case, is the keyword; quoted (`"name"`) it is an identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    All,
    Alter,
    Analyze,
    And,
    Any,
    As,
    Asc,
    Begin,
    By,
    Cardinality,
    Continuous,
    Create,
    Database,
    Databases,
    Default,
    Delete,
    Desc,
    Destinations,
    Diagnostics,
    Distinct,
    Drop,
    Duration,
    End,
    Every,
    Exact,
    Explain,
    False,
    Field,
    For,
    From,
    Grant,
    Grants,
    Group,
    Groups,
    In,
    Inf,
    Insert,
    Into,
    Key,
    Keys,
    Kill,
    Limit,
    Measurement,
    Measurements,
    Name,
    Offset,
    On,
    Or,
    Order,
    Password,
    Policies,
    Policy,
    Privileges,
    Queries,
    Query,
    Read,
    Replication,
    Resample,
    Retention,
    Revoke,
    Select,
    Series,
    Set,
    Shard,
    Shards,
    Show,
    Slimit,
    Soffset,
    Stats,
    Subscription,
    Subscriptions,
    Tag,
    To,
    True,
    User,
    Users,
    Values,
    Where,
    With,
    Write,
}

/// The longest keyword's length (SUBSCRIPTIONS).
const LONGEST: usize = 13;

/// Sorted by name: [`Keyword::lookup`] searches it by halves.
const KEYWORDS: &[(Keyword, &str)] = &[
    (Keyword::All, "ALL"),
    (Keyword::Alter, "ALTER"),
    (Keyword::Analyze, "ANALYZE"),
    (Keyword::And, "AND"),
    (Keyword::Any, "ANY"),
    (Keyword::As, "AS"),
    (Keyword::Asc, "ASC"),
    (Keyword::Begin, "BEGIN"),
    (Keyword::By, "BY"),
    (Keyword::Cardinality, "CARDINALITY"),
    (Keyword::Continuous, "CONTINUOUS"),
    (Keyword::Create, "CREATE"),
    (Keyword::Database, "DATABASE"),
    (Keyword::Databases, "DATABASES"),
    (Keyword::Default, "DEFAULT"),
    (Keyword::Delete, "DELETE"),
    (Keyword::Desc, "DESC"),
    (Keyword::Destinations, "DESTINATIONS"),
    (Keyword::Diagnostics, "DIAGNOSTICS"),
    (Keyword::Distinct, "DISTINCT"),
    (Keyword::Drop, "DROP"),
    (Keyword::Duration, "DURATION"),
    (Keyword::End, "END"),
    (Keyword::Every, "EVERY"),
    (Keyword::Exact, "EXACT"),
    (Keyword::Explain, "EXPLAIN"),
    (Keyword::False, "FALSE"),
    (Keyword::Field, "FIELD"),
    (Keyword::For, "FOR"),
    (Keyword::From, "FROM"),
    (Keyword::Grant, "GRANT"),
    (Keyword::Grants, "GRANTS"),
    (Keyword::Group, "GROUP"),
    (Keyword::Groups, "GROUPS"),
    (Keyword::In, "IN"),
    (Keyword::Inf, "INF"),
    (Keyword::Insert, "INSERT"),
    (Keyword::Into, "INTO"),
    (Keyword::Key, "KEY"),
    (Keyword::Keys, "KEYS"),
    (Keyword::Kill, "KILL"),
    (Keyword::Limit, "LIMIT"),
    (Keyword::Measurement, "MEASUREMENT"),
    (Keyword::Measurements, "MEASUREMENTS"),
    (Keyword::Name, "NAME"),
    (Keyword::Offset, "OFFSET"),
    (Keyword::On, "ON"),
    (Keyword::Or, "OR"),
    (Keyword::Order, "ORDER"),
    (Keyword::Password, "PASSWORD"),
    (Keyword::Policies, "POLICIES"),
    (Keyword::Policy, "POLICY"),
    (Keyword::Privileges, "PRIVILEGES"),
    (Keyword::Queries, "QUERIES"),
    (Keyword::Query, "QUERY"),
    (Keyword::Read, "READ"),
    (Keyword::Replication, "REPLICATION"),
    (Keyword::Resample, "RESAMPLE"),
    (Keyword::Retention, "RETENTION"),
    (Keyword::Revoke, "REVOKE"),
    (Keyword::Select, "SELECT"),
    (Keyword::Series, "SERIES"),
    (Keyword::Set, "SET"),
    (Keyword::Shard, "SHARD"),
    (Keyword::Shards, "SHARDS"),
    (Keyword::Show, "SHOW"),
    (Keyword::Slimit, "SLIMIT"),
    (Keyword::Soffset, "SOFFSET"),
    (Keyword::Stats, "STATS"),
    (Keyword::Subscription, "SUBSCRIPTION"),
    (Keyword::Subscriptions, "SUBSCRIPTIONS"),
    (Keyword::Tag, "TAG"),
    (Keyword::To, "TO"),
    (Keyword::True, "TRUE"),
    (Keyword::User, "USER"),
    (Keyword::Users, "USERS"),
    (Keyword::Values, "VALUES"),
    (Keyword::Where, "WHERE"),
    (Keyword::With, "WITH"),
    (Keyword::Write, "WRITE"),
];

impl Keyword {
    /// The keyword a bare identifier spells, in any case.
    pub(crate) fn lookup(word: &str) -> Option<Keyword> {
        // Every identifier of a query is looked up: a binary search over the capitalised word
        // instead of comparing it with each of the 80 names in turn (a sixteenth of the
        // parser's instructions).
        let mut upper = [0u8; LONGEST];
        let upper = upper.get_mut(..word.len())?;
        upper.copy_from_slice(word.as_bytes());
        upper.make_ascii_uppercase();
        KEYWORDS.binary_search_by(|(_, name)| name.as_bytes().cmp(upper)).ok().map(|at| KEYWORDS[at].0)
    }

    /// The keyword in capitals, as errors and rendering spell it.
    pub(crate) fn as_str(self) -> &'static str {
        KEYWORDS.iter().find(|(keyword, _)| *keyword == self).map_or("?", |(_, name)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyword_is_found_in_any_case_and_nothing_else() {
        assert!(KEYWORDS.windows(2).all(|w| w[0].1 < w[1].1), "sorted, no repeats");
        assert_eq!(KEYWORDS.iter().map(|(_, name)| name.len()).max(), Some(LONGEST));
        for &(keyword, name) in KEYWORDS {
            assert_eq!(Keyword::lookup(name), Some(keyword));
            assert_eq!(Keyword::lookup(&name.to_ascii_lowercase()), Some(keyword));
            let mixed: String = name.chars().enumerate().map(|(i, c)| if i % 2 == 0 { c.to_ascii_lowercase() } else { c }).collect();
            assert_eq!(Keyword::lookup(&mixed), Some(keyword));
            assert_eq!(Keyword::lookup(&format!("{name}X")), None);
            assert_eq!(Keyword::lookup(&name[1..]).map(Keyword::as_str), KEYWORDS.iter().find(|(_, n)| *n == &name[1..]).map(|(_, n)| *n));
        }
        for word in ["", "truck", "SUBSCRIPTIONSX", "ÄND", "sélect", "time"] {
            assert_eq!(Keyword::lookup(word), None, "{word}");
        }
    }
}
