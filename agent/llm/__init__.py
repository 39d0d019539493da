"""The LLM boundary: the provider factory, the embedded llama.cpp server and its GGUF, prompt files, the one call
path every graph uses (render → constrain or parse → retry → account usage), and the scripted model for tests."""
