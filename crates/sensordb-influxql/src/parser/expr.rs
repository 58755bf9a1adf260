//! Expressions, as InfluxDB 1.8's `parseExpr` / `parseUnaryExpr` / `parseCall` /
//! `parseVarRef` read them: binary operators by precedence, left-associative, with a regex on the
//! right of `=~` and `!~`; literals; `-` folded into number and duration literals and kept as
//! [`Expr::Negate`] over anything else; calls (the `(` right against the name), variable
//! references with `::type` casts, `*` wildcards and `DISTINCT x`.
//!
//! Nesting is bounded (parentheses, calls and negations together at most [`MAX_NESTING`] deep,
//! any expression tree at most [`MAX_DEPTH`] deep) so that neither parsing nor rendering nor
//! dropping a tree can exhaust the stack on hostile input.

use super::{Parser, Result};
use crate::ast::{BinaryExpr, BinaryOp, Call, DataType, Expr, VarRef, WildcardType};
use crate::lexer::{Keyword, Tok};

/// Parentheses, calls, negations and subqueries open at once.
pub(crate) const MAX_NESTING: usize = 100;
/// Depth of an expression tree (a chain `a + b + c` is as deep as it has operators).
pub(crate) const MAX_DEPTH: usize = 1000;

fn binary_op(tok: &Tok) -> Option<BinaryOp> {
    Some(match tok {
        Tok::Plus => BinaryOp::Add,
        Tok::Minus => BinaryOp::Sub,
        Tok::Star => BinaryOp::Mul,
        Tok::Slash => BinaryOp::Div,
        Tok::Percent => BinaryOp::Mod,
        Tok::Ampersand => BinaryOp::BitAnd,
        Tok::Pipe => BinaryOp::BitOr,
        Tok::Caret => BinaryOp::BitXor,
        Tok::Eq => BinaryOp::Eq,
        Tok::NotEq => BinaryOp::NotEq,
        Tok::Lt => BinaryOp::Lt,
        Tok::LtEq => BinaryOp::LtEq,
        Tok::Gt => BinaryOp::Gt,
        Tok::GtEq => BinaryOp::GtEq,
        Tok::EqRegex => BinaryOp::EqRegex,
        Tok::NotEqRegex => BinaryOp::NotEqRegex,
        Tok::Keyword(Keyword::And) => BinaryOp::And,
        Tok::Keyword(Keyword::Or) => BinaryOp::Or,
        _ => return None,
    })
}

/// The first comparison or logical operator in `expr`, calls included (InfluxDB refuses them
/// in the SELECT list).
pub(crate) fn condition_operator(expr: &Expr) -> Option<BinaryOp> {
    match expr {
        Expr::Binary(binary) if binary.op.is_condition() => Some(binary.op),
        Expr::Binary(binary) => condition_operator(&binary.lhs).or_else(|| condition_operator(&binary.rhs)),
        Expr::Call(call) => call.args.iter().find_map(condition_operator),
        Expr::Negate(inner) | Expr::Paren(inner) => condition_operator(inner),
        _ => None,
    }
}

impl Parser<'_> {
    /// One more level of nesting, or an error past [`MAX_NESTING`].
    pub(super) fn enter(&mut self, offset: usize) -> Result<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(self.invalid(offset, format!("query nested more than {MAX_NESTING} levels deep")));
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.nesting -= 1;
    }

    pub(crate) fn parse_expr(&mut self) -> Result<Expr> {
        Ok(self.parse_expr_with_depth()?.0)
    }

    fn parse_expr_with_depth(&mut self) -> Result<(Expr, usize)> {
        let lhs = self.parse_unary()?;
        self.parse_binary_rest(lhs, 1)
    }

    /// Precedence climbing: folds operators of at least `min_precedence` onto `lhs`.
    fn parse_binary_rest(&mut self, (mut lhs, mut depth): (Expr, usize), min_precedence: u8) -> Result<(Expr, usize)> {
        loop {
            let token = self.peek()?;
            let Some(op) = binary_op(&token.tok) else { return Ok((lhs, depth)) };
            let precedence = op.precedence();
            if precedence < min_precedence {
                return Ok((lhs, depth));
            }
            self.next()?;
            let first = match op {
                BinaryOp::EqRegex | BinaryOp::NotEqRegex => (Expr::Regex(self.expect_regex()?), 1),
                _ => self.parse_unary()?,
            };
            let (rhs, rhs_depth) = self.parse_binary_rest(first, precedence + 1)?;
            depth = depth.max(rhs_depth) + 1;
            if depth > MAX_DEPTH {
                return Err(self.invalid(token.start, format!("expression more than {MAX_DEPTH} levels deep")));
            }
            lhs = Expr::Binary(Box::new(BinaryExpr { op, lhs, rhs }));
        }
    }

    /// An operand: a parenthesised expression, literal, reference, call, wildcard, DISTINCT,
    /// or a signed one of those.
    fn parse_unary(&mut self) -> Result<(Expr, usize)> {
        let before = self.lexer;
        let token = self.next()?;
        let expr = match token.tok {
            Tok::LParen => {
                self.enter(token.start)?;
                let (inner, depth) = self.parse_expr_with_depth()?;
                self.expect(Tok::RParen, ")")?;
                self.leave();
                return Ok((Expr::Paren(Box::new(inner)), depth + 1));
            }
            Tok::Ident(name) => {
                if self.peek_raw()?.tok == Tok::LParen {
                    self.next_raw()?;
                    return self.parse_call(name, token.start);
                }
                self.lexer = before;
                Expr::VarRef(self.parse_var_ref()?)
            }
            Tok::Keyword(Keyword::Distinct) => {
                let next = self.next_raw()?;
                match next.tok {
                    Tok::LParen => return self.parse_call("distinct".to_string(), token.start),
                    Tok::Trivia => Expr::Distinct(self.parse_ident()?),
                    _ => return Err(self.unexpected(&next, &["(", "identifier"])),
                }
            }
            Tok::String(text) => Expr::String(text),
            Tok::Number(text) => match text.parse::<f64>() {
                Ok(value) if value.is_finite() => Expr::Float(value),
                _ => return Err(self.invalid(token.start, "unable to parse number")),
            },
            Tok::Integer(text) => match (text.parse::<i64>(), text.parse::<u64>()) {
                (Ok(value), _) => Expr::Integer(value),
                (_, Ok(value)) => Expr::Unsigned(value),
                _ => return Err(self.invalid(token.start, "unable to parse integer")),
            },
            Tok::Keyword(Keyword::True) => Expr::Bool(true),
            Tok::Keyword(Keyword::False) => Expr::Bool(false),
            Tok::Duration(text) => Expr::Duration(super::parse_duration(&text).map_err(|message| self.invalid(token.start, message))?),
            Tok::Star => Expr::Wildcard(self.parse_wildcard_type()?),
            Tok::Plus | Tok::Minus => return self.parse_signed(token.tok == Tok::Minus, token.start),
            _ => return Err(self.unexpected(&token, &["identifier", "string", "number", "bool"])),
        };
        Ok((expr, 1))
    }

    /// What follows a `+` or `-` in operand position: a number or duration (negated in place),
    /// or a reference, call or parenthesised expression.
    fn parse_signed(&mut self, negative: bool, sign_start: usize) -> Result<(Expr, usize)> {
        let token = self.peek()?;
        if !matches!(token.tok, Tok::Number(_) | Tok::Integer(_) | Tok::Duration(_) | Tok::LParen | Tok::Ident(_)) {
            return Err(self.unexpected(&token, &["identifier", "number", "duration", "("]));
        }
        self.enter(sign_start)?;
        let (operand, depth) = self.parse_unary()?;
        self.leave();
        if !negative {
            return Ok((operand, depth));
        }
        let negated = match operand {
            Expr::Float(value) => Expr::Float(-value),
            Expr::Integer(value) => Expr::Integer(-value),
            // i64::MIN reads as an unsigned literal first, being one above i64::MAX.
            Expr::Unsigned(value) if value == i64::MIN.unsigned_abs() => Expr::Integer(i64::MIN),
            Expr::Unsigned(value) => return Err(self.invalid(token.start, format!("constant -{value} underflows int64"))),
            Expr::Duration(duration) => Expr::Duration(crate::ast::Duration(-duration.0)),
            other => return Ok((Expr::Negate(Box::new(other)), depth + 1)),
        };
        Ok((negated, depth))
    }

    /// `::field` or `::tag` right after a `*`.
    fn parse_wildcard_type(&mut self) -> Result<Option<WildcardType>> {
        if self.peek_raw()?.tok != Tok::DoubleColon {
            return Ok(None);
        }
        self.next_raw()?;
        let token = self.next_raw()?;
        match token.tok {
            Tok::Keyword(Keyword::Field) => Ok(Some(WildcardType::Field)),
            Tok::Keyword(Keyword::Tag) => Ok(Some(WildcardType::Tag)),
            _ => Err(self.unexpected(&token, &["field", "tag"])),
        }
    }

    /// `name(args)` whose `(` is consumed; the name is lower-cased. An argument is a regex or
    /// an expression.
    fn parse_call(&mut self, name: String, start: usize) -> Result<(Expr, usize)> {
        self.enter(start)?;
        let mut args = Vec::new();
        let mut depth = 0;
        if !self.eat(&Tok::RParen)? {
            loop {
                let (arg, arg_depth) = match self.parse_regex()? {
                    Some(regex) => (Expr::Regex(regex), 1),
                    None => self.parse_expr_with_depth()?,
                };
                depth = depth.max(arg_depth);
                args.push(arg);
                if !self.eat(&Tok::Comma)? {
                    break;
                }
            }
            self.expect(Tok::RParen, ")")?;
        }
        self.leave();
        Ok((Expr::Call(Call { name: name.to_lowercase(), args }), depth + 1))
    }

    /// A (dotted) name and its optional `::type`, both right against the name.
    pub(super) fn parse_var_ref(&mut self) -> Result<VarRef> {
        let (_, segments) = self.parse_segmented_idents()?;
        let name = segments.into_iter().map(Option::unwrap_or_default).collect::<Vec<_>>().join(".");
        let mut data_type = None;
        if self.peek_raw()?.tok == Tok::DoubleColon {
            self.next_raw()?;
            let token = self.next_raw()?;
            data_type = Some(match &token.tok {
                Tok::Ident(t) if t.eq_ignore_ascii_case("float") => DataType::Float,
                Tok::Ident(t) if t.eq_ignore_ascii_case("integer") => DataType::Integer,
                Tok::Ident(t) if t.eq_ignore_ascii_case("unsigned") => DataType::Unsigned,
                Tok::Ident(t) if t.eq_ignore_ascii_case("string") => DataType::String,
                Tok::Ident(t) if t.eq_ignore_ascii_case("boolean") => DataType::Boolean,
                Tok::Keyword(Keyword::Field) => DataType::Field,
                Tok::Keyword(Keyword::Tag) => DataType::Tag,
                _ => return Err(self.unexpected(&token, &["float", "integer", "unsigned", "string", "boolean", "field", "tag"])),
            });
        }
        Ok(VarRef { name, data_type })
    }
}
