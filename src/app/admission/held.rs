//! A relayed reply's body that holds its call's admission slot until it
//! ends (or is dropped): the call is in flight toward the group while its
//! answer is still coming.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::Frame;
use tonic::body::Body;

use super::Permit;
use crate::upstream::raw::RawReply;

/// `reply`, its body holding `permit` to its end.
pub(crate) fn held_to_its_end(reply: RawReply, permit: Permit) -> RawReply {
    reply.map(|body| {
        Body::new(Held {
            body,
            permit: Some(permit),
        })
    })
}

struct Held {
    body: Body,
    permit: Option<Permit>,
}

impl http_body::Body for Held {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, tonic::Status>>> {
        let frame = std::task::ready!(Pin::new(&mut self.body).poll_frame(cx));
        let ended = match &frame {
            None | Some(Err(_)) => true,
            Some(Ok(frame)) => frame.is_trailers(),
        };
        if ended {
            self.permit = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
