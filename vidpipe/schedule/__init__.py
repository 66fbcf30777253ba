"""Scheduling: the frame hub between capture and inference, the turn clock, the in-flight
cap, the completions inbox and the scheduler that preprocesses, submits and hands results on.

Capture depends only on the small mailbox protocol in ``vidpipe.capture.mailbox``; this
package implements it, so capture never imports it.
"""
