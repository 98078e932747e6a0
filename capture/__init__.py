"""capture: an OpenAI-spec proxy that records exact token ids and logprobs of every model call.

Never imports Harbor, Gradio or `workbench`.
"""
