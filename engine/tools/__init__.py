"""Tools through MCP (the Model Context Protocol): the servers the person configured
(`servers`), talking to them through the official `mcp` SDK (`client`: list a server's tools,
run one, bounded by a deadline), the rules for which tools a chat offers and whether a call
may run (`approval`), the calls as transcript records and the messages the model is shown
(`transcript`), and the rounds as one function (`loop`). Qt-free; the window runs the tools on
a background thread.
"""
