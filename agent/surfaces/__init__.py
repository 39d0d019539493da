"""How people and programs reach the methods: the CLI, the LangServe app, LangChain tools and the server load test."""
