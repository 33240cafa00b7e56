//! The dashboard itself (the `top` feature): ratatui draws what
//! [`view`] makes of the endpoint's answers.

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use anyhow::Context as _;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize as _};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};
use ratatui::{DefaultTerminal, Frame};
use serde_json::Value as Json;

use super::client;
use super::view::{self, Link, Window, COLUMNS};
use crate::cli::Failure;

/// How often the topology is fetched.
const PERIOD: Duration = Duration::from_secs(1);
/// How long the loop waits for a key before it looks for a new answer.
const TICK: Duration = Duration::from_millis(100);

/// Runs the dashboard against `addr` until the user quits.
///
/// # Errors
/// Standard output is not a terminal, or the terminal cannot be driven.
pub fn top(
    addr: SocketAddr,
    token_file: Option<&std::path::Path>,
    tls_ca: Option<&std::path::Path>,
) -> Result<(), Failure> {
    if !std::io::stdout().is_terminal() {
        return Err(anyhow::anyhow!("squall top draws on a terminal; stdout is not one").into());
    }
    let token = token_file
        .map(|path| crate::http::Token::from_file(path).map(|t| t.secret().to_owned()))
        .transpose()
        .map_err(Failure::http_config)?;
    let tls = tls_ca.map(client::tls_config).transpose().map_err(Failure::http_config)?;
    let target = client::Target { addr, token, tls };
    let answers = client::poll(target, "/api/v1/topology", PERIOD)
        .context("cannot start the thread that polls the endpoint")?;
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let result = Dashboard::new(addr).run(&mut terminal, &answers);
    // Restored on every way out; a panic is restored by ratatui's hook.
    let restored = ratatui::try_restore().context("cannot restore the terminal");
    result?;
    restored?;
    Ok(())
}

/// What a key asks for.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    Quit,
    Redraw,
    Nothing,
}

/// The dashboard's state between two frames.
#[derive(Debug)]
struct Dashboard {
    addr: String,
    last: Option<Json>,
    error: Option<String>,
    window: Window,
    selected: TableState,
}

impl Dashboard {
    fn new(addr: SocketAddr) -> Self {
        Self {
            addr: addr.to_string(),
            last: None,
            error: None,
            window: Window::default(),
            selected: TableState::default(),
        }
    }

    fn run(
        &mut self,
        terminal: &mut DefaultTerminal,
        answers: &Receiver<client::Fetched>,
    ) -> Result<(), Failure> {
        let mut dirty = true;
        loop {
            for answer in answers.try_iter() {
                match answer {
                    Ok(json) => (self.last, self.error) = (Some(json), None),
                    Err(e) => self.error = Some(e.to_string()),
                }
                dirty = true;
            }
            if dirty {
                terminal.draw(|frame| self.draw(frame))?;
                dirty = false;
            }
            if event::poll(TICK)? {
                match event::read()? {
                    Event::Key(key) => match self.key(key) {
                        Action::Quit => return Ok(()),
                        Action::Redraw => dirty = true,
                        Action::Nothing => {}
                    },
                    Event::Resize(..) => dirty = true,
                    _ => {}
                }
            }
        }
    }

    fn key(&mut self, key: KeyEvent) -> Action {
        if key.kind != KeyEventKind::Press {
            return Action::Nothing;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Action::Quit,
            KeyCode::Char('w') => {
                self.window = self.window.next();
                Action::Redraw
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected.select_next();
                Action::Redraw
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.selected.select_previous();
                Action::Redraw
            }
            _ => Action::Nothing,
        }
    }

    fn draw(&mut self, frame: &mut Frame<'_>) {
        let [head, body, error, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(2),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        let link =
            Link { addr: &self.addr, last: self.last.as_ref(), error: self.error.as_deref() };
        let style = match (&self.last, &self.error) {
            (_, Some(_)) => Style::new().fg(Color::Red).bold(),
            (None, None) => Style::new().fg(Color::Yellow),
            (Some(_), None) => Style::new().bold(),
        };
        frame.render_widget(Paragraph::new(view::header(link)).style(style), head);
        let rows = self.last.as_ref().map(|t| view::rows(t, self.window)).unwrap_or_default();
        self.draw_table(frame, body, &rows);
        if let Some(message) = last_error(&rows, self.selected.selected()) {
            frame.render_widget(Paragraph::new(message).fg(Color::Red), error);
        }
        let footer = Paragraph::new(view::footer(self.window)).style(Style::new().reversed());
        frame.render_widget(footer, foot);
    }

    fn draw_table(&mut self, frame: &mut Frame<'_>, area: Rect, rows: &[view::Row]) {
        let widths = view::widths(rows);
        let header = Row::new(COLUMNS.iter().enumerate().map(|(i, title)| cell(i, title)))
            .style(Style::new().bold().underlined());
        let body = rows.iter().map(|r| {
            let row = Row::new(r.cells.iter().enumerate().map(|(i, text)| cell(i, text)));
            if r.inactive {
                row.style(Style::new().add_modifier(Modifier::DIM))
            } else {
                row
            }
        });
        let table = Table::new(body, widths.map(Constraint::Length))
            .header(header)
            .column_spacing(2)
            .row_highlight_style(Style::new().reversed());
        frame.render_stateful_widget(table, area, &mut self.selected);
    }
}

/// A cell: the first two columns (names) to the left, figures to the right.
fn cell(column: usize, text: &str) -> Cell<'static> {
    let line = Line::from(text.to_owned());
    Cell::from(if column < 2 { line } else { line.right_aligned() })
}

/// The line under the table: the selected component's last error, else
/// the first component's that has one.
fn last_error(rows: &[view::Row], selected: Option<usize>) -> Option<String> {
    let chosen = selected.and_then(|i| rows.get(i)).filter(|r| r.last_error.is_some());
    let row = chosen.or_else(|| rows.iter().find(|r| r.last_error.is_some()))?;
    Some(format!("last error of {}: {}", row.cells[0], row.last_error.as_deref()?))
}
