from agent.cli import main

main()
