//! The agent's side of exec, attach and port-forward streams (`proto/node.proto`'s
//! `StreamOpen`): what a stream connects to on the node, as the [`Workloads`] port opens it,
//! relayed under credit both ways. Output is read only with the controller's credit in hand,
//! so a client that stops reading leaves the process blocked on its pipe; input is credited
//! back only once the process has taken it. A cancel (the client went away) hangs the process
//! up, and kills it after a grace.
//!
//! [`Workloads`]: crate::session::Workloads

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use kayra_api::session::{
    Input, NodeMessage, OutputChannel, StreamEnd, StreamOpen, StreamOutcome, StreamOutput, TerminalSize,
};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// The largest piece of output sent at once.
const CHUNK: usize = 32 * 1024;
/// How long an exec'd process that ignores its hang-up has before it is killed.
const HANG_UP_GRACE: Duration = Duration::from_secs(2);
/// How long output may stay silent after an exec'd process ended before the stream ends without
/// it (a descendant may hold the pipe open).
const DRAIN: Duration = Duration::from_secs(1);

/// What a stream connects to on the node, as the [`crate::session::Workloads`] port opens it.
pub struct Connected {
    /// Where the client's input goes (the process's stdin, the forwarded connection); `None`
    /// when the stream takes none.
    pub input: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// What the stream produces, until it ends.
    pub output: BoxStream<'static, Result<(OutputChannel, Vec<u8>), String>>,
    /// Resizes the process's terminal, when it has one.
    pub resize: Option<Box<dyn Fn(TerminalSize) + Send + Sync>>,
    /// The exec'd process, whose exit ends the stream; without one, the end of the output does.
    pub process: Option<Box<dyn Process>>,
}

/// An exec'd process, as a stream waits on it and ends it.
#[async_trait::async_trait]
pub trait Process: Send {
    /// Waits for it to end: its exit code, or 128 + the signal that ended it.
    async fn wait(&mut self) -> Result<i32, String>;
    /// Its client went away: hang it up, and kill it unless it has ended within `grace`.
    fn hang_up(&mut self, grace: Duration);
}

/// One stream being served: where its input goes, its output's credit, how to stop it.
pub(crate) struct Serving {
    pub(crate) input: mpsc::UnboundedSender<Input>,
    pub(crate) credit: Arc<Semaphore>,
    pub(crate) cancel: CancellationToken,
}

impl Serving {
    /// A stream with `window` bytes of output credit, ended by `cancel`; and where its input
    /// arrives.
    pub(crate) fn new(window: u64, cancel: CancellationToken) -> (Serving, mpsc::UnboundedReceiver<Input>) {
        let (input, inputs) = mpsc::unbounded_channel();
        let credit = Arc::new(Semaphore::new(permits(window)));
        (Serving { input, credit, cancel }, inputs)
    }
}

/// `bytes` of credit as semaphore permits.
pub(crate) fn permits(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS)
}

/// What the relay does next.
enum Step {
    /// The process ended with this code (or could not be waited on).
    Exited(Result<i32, String>),
    /// The output gave this (`None`: it ended).
    Output(Option<Result<(OutputChannel, Vec<u8>), String>>),
    /// The stream was cancelled, or its credit closed.
    Cancelled,
}

/// Serves stream `open` over what `connected` connects it to, until it ends or is cancelled;
/// then tells `done`.
pub(crate) async fn serve(
    open: StreamOpen,
    connected: Result<Connected, String>,
    sender: mpsc::Sender<NodeMessage>,
    inputs: mpsc::UnboundedReceiver<Input>,
    credit: Arc<Semaphore>,
    cancel: CancellationToken,
    done: mpsc::UnboundedSender<u64>,
) {
    let id = open.id;
    let end = |outcome| NodeMessage::StreamEnd(StreamEnd { id, outcome });
    let connected = match connected {
        Ok(connected) => connected,
        Err(error) => {
            let _ = sender.send(end(StreamOutcome::Failed(error))).await;
            let _ = done.send(id);
            return;
        }
    };
    let Connected { input, mut output, resize, mut process } = connected;
    let chunk = CHUNK.min(permits(open.window)).max(1);
    let writing = tokio::spawn(write_input(id, input, resize, inputs, sender.clone()));
    let outcome = {
        let mut exited: Option<i32> = None;
        let mut waiting = process.as_mut().map(|process| process.wait());
        loop {
            let wanted = u32::try_from(chunk).unwrap_or(u32::MAX);
            let permit = tokio::select! {
                () = cancel.cancelled() => None,
                permit = credit.acquire_many(wanted) => permit.ok(),
            };
            let Some(permit) = permit else { break None };
            let step = match (waiting.as_mut(), exited) {
                (Some(wait), _) => tokio::select! {
                    () = cancel.cancelled() => Step::Cancelled,
                    code = wait => Step::Exited(code),
                    next = output.next() => Step::Output(next),
                },
                // The process has ended: what it left in its pipes still goes, unless nothing
                // comes for a while (a descendant may hold them open).
                (None, Some(_)) => tokio::select! {
                    () = cancel.cancelled() => Step::Cancelled,
                    next = tokio::time::timeout(DRAIN, output.next()) => Step::Output(next.unwrap_or(None)),
                },
                (None, None) => tokio::select! {
                    () = cancel.cancelled() => Step::Cancelled,
                    next = output.next() => Step::Output(next),
                },
            };
            match step {
                Step::Cancelled => break None,
                Step::Exited(code) => {
                    waiting = None;
                    match code {
                        Ok(code) => exited = Some(code),
                        Err(error) => break Some(StreamOutcome::Failed(error)),
                    }
                }
                Step::Output(Some(Ok((channel, data)))) => {
                    // The credit taken for what was read; the rest goes back.
                    permit.forget();
                    credit.add_permits(chunk.saturating_sub(data.len()));
                    for piece in data.chunks(chunk) {
                        let message = StreamOutput { id, channel, data: piece.to_vec(), eof: false };
                        if sender.send(NodeMessage::StreamOutput(message)).await.is_err() {
                            break;
                        }
                    }
                }
                Step::Output(Some(Err(error))) => break Some(StreamOutcome::Failed(error)),
                Step::Output(None) => match waiting.take() {
                    // The output ended before the process: its exit ends the stream.
                    Some(wait) => {
                        let code = tokio::select! {
                            () = cancel.cancelled() => break None,
                            code = wait => code,
                        };
                        break Some(code.map_or_else(StreamOutcome::Failed, StreamOutcome::Exited));
                    }
                    None => break Some(StreamOutcome::Exited(exited.unwrap_or(0))),
                },
            }
        }
    };
    writing.abort();
    match outcome {
        Some(outcome) => {
            let _ = sender.send(end(outcome)).await;
        }
        None => {
            if let Some(process) = process.as_mut() {
                process.hang_up(HANG_UP_GRACE);
                let _ = tokio::time::timeout(HANG_UP_GRACE * 2, process.wait()).await;
            }
        }
    }
    let _ = done.send(id);
}

/// Writes the client's input into the stream as it comes, crediting each piece back once
/// taken.
async fn write_input(
    id: u64,
    mut input: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    resize: Option<Box<dyn Fn(TerminalSize) + Send + Sync>>,
    mut inputs: mpsc::UnboundedReceiver<Input>,
    sender: mpsc::Sender<NodeMessage>,
) {
    while let Some(piece) = inputs.recv().await {
        let cost = piece.cost();
        match piece {
            Input::Data(data) => {
                if let Some(writer) = input.as_mut()
                    && writer.write_all(&data).await.is_err()
                {
                    // The process no longer reads: what comes is dropped, still credited.
                    input = None;
                }
            }
            Input::Close => {
                if let Some(mut writer) = input.take() {
                    let _ = writer.shutdown().await;
                }
            }
            Input::Resize(size) => {
                if let Some(resize) = &resize {
                    resize(size);
                }
            }
        }
        if sender.send(NodeMessage::StreamCredit { id, bytes: cost }).await.is_err() {
            return;
        }
    }
}
