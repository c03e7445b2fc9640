"""Tools through MCP (the Model Context Protocol): the servers the person configured
(`servers`), talking to them through the official `mcp` SDK (`client`: list a server's tools,
run one, bounded by a deadline), and the rules for which tools a chat offers and whether a call
may run (`approval`). Qt-free; the window drives them from a background thread.
"""
